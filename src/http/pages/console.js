// The operator console: GET /api/tasks with the filters of the form (state, what a task waits for, the tool it
// waits on, user, age, part of its id), a page at a time. The filters live in the address, so a filtered view can be
// shared and survives a reload. Each row links to the task's live page (history and operator actions).
import { base, clock, el, get, session, showError } from './common.js';

const $ = (id) => document.getElementById(id);
const form = $('filters');
const message = $('message');
const FIELDS = ['state', 'waitingFor', 'tool', 'user', 'olderThanMin', 'q', 'limit'];
let offset = 0;
let loads = 0;

function age(ms) {
  const m = Math.floor(ms / 60_000);
  if (m < 1) return `${Math.max(0, Math.floor(ms / 1000))} s`;
  if (m < 120) return `${m} min`;
  const h = Math.floor(m / 60);
  return h < 48 ? `${h} h` : `${Math.floor(h / 24)} d`;
}

/** The form's filters as the address's query, and back. */
function fromAddress() {
  const params = new URLSearchParams(location.search);
  for (const name of FIELDS) if (params.has(name)) form.elements[name].value = params.get(name);
  offset = Math.max(0, Number(params.get('offset')) || 0);
}

function filters() {
  const params = new URLSearchParams();
  for (const name of FIELDS) {
    const value = String(form.elements[name].value ?? '').trim();
    if (value !== '') params.set(name, value);
  }
  return params;
}

function apiQuery(params) {
  const query = new URLSearchParams();
  for (const [name, value] of params) {
    if (name === 'olderThanMin') query.set('olderThanMs', String(Math.round(Number(value) * 60_000)));
    else query.set(name, value);
  }
  query.set('offset', String(offset));
  return query;
}

async function load() {
  const params = filters();
  const shown = new URLSearchParams(params);
  if (offset > 0) shown.set('offset', String(offset));
  history.replaceState(null, '', `${location.pathname}${shown.size ? `?${shown}` : ''}`);
  const limit = Number(params.get('limit') ?? 25);
  try {
    const { tasks } = await get(`/api/tasks?${apiQuery(params)}`);
    message.replaceChildren();
    const now = Date.now();
    $('rows').replaceChildren(
      ...(tasks.length === 0
        ? [el('tr', {}, el('td', { colspan: 8, class: 'empty', 'data-testid': 'no-tasks' }, 'No task matches.'))]
        : tasks.map((t) =>
            el(
              'tr',
              { 'data-task': t.taskId, 'data-testid': 'task-row' },
              el(
                'td',
                {},
                el(
                  'a',
                  { href: `${base}/tasks/${encodeURIComponent(t.taskId)}`, 'data-testid': 'task-link' },
                  t.taskId,
                ),
              ),
              el('td', {}, el('span', { class: `badge ${t.state}` }, t.state)),
              el('td', {}, t.waitingFor ?? '—'),
              el('td', {}, t.tool ?? '—'),
              el('td', {}, t.userId),
              el('td', { title: clock(t.createdAt) }, age(now - t.createdAt)),
              el('td', { class: 'small' }, clock(t.updatedAt)),
              el('td', { class: 'small' }, t.outcomeCode ?? ''),
            ),
          )),
    );
    $('page').textContent = `${offset + 1}–${offset + tasks.length}`;
    $('prev').disabled = offset === 0;
    $('next').disabled = tasks.length < limit;
    // How many loads finished: a test waits for the next one.
    document.body.dataset.loads = String(++loads);
  } catch (error) {
    showError(message, error);
  }
}

form.addEventListener('submit', (event) => {
  event.preventDefault();
  offset = 0;
  load();
});
form.addEventListener('reset', () => {
  offset = 0;
  setTimeout(load);
});
$('prev').addEventListener('click', () => {
  offset = Math.max(0, offset - Number(form.elements.limit.value));
  load();
});
$('next').addEventListener('click', () => {
  offset += Number(form.elements.limit.value);
  load();
});

try {
  const { principal } = await session();
  document.querySelector('[data-testid="who"]').textContent =
    `signed in as ${principal.userId} @ ${principal.tenantId} (${principal.scopes.join(', ')})`;
  fromAddress();
  await load();
} catch (error) {
  showError(message, error);
}
