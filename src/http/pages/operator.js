// The task page's history and operator panel: the task's model turns (messages, tool outputs, redacted as stored),
// its calls and where each stands (pending, awaiting confirmation, outcome unknown), from GET .../history, for the
// task's user or an operator; and, for an operator of the task's tenant, the actions only they take: resolve a held
// write's review, ask the model again now for a task waiting out a model outage, and erase the task. Cancel is the step controls' button, offered to operators too.
import { base, clock, el, get, json, post } from './common.js';

const taskId = decodeURIComponent(location.pathname.split('/').pop() ?? '');
const path = `/api/tasks/${encodeURIComponent(taskId)}`;
const $ = (id) => document.getElementById(id);
let erased = false;

function entryText(entry) {
  switch (entry.kind) {
    case 'goal':
      return ['goal', entry.text];
    case 'proposal':
      return [
        'model proposed',
        [entry.text, ...entry.calls.map((c) => `${c.tool}(${c.arguments})`)].filter(Boolean).join('\n'),
      ];
    case 'result':
      return [
        `${entry.observation.tool} returned`,
        entry.observation.ok ? json(entry.observation.data) : `${entry.observation.code}: ${entry.observation.summary}`,
      ];
    case 'user_answer':
      return ['user answered', entry.text];
    case 'no_answer':
      return ['no answer', entry.question];
    case 'invalid_output':
      return ['invalid model output', entry.detail];
    default:
      return [entry.kind.replace(/_/g, ' '), entry.text ?? ''];
  }
}

function renderHistory(history) {
  $('calls').replaceChildren(
    ...history.calls.map((call) =>
      el(
        'tr',
        { 'data-call': call.callId, 'data-phase': call.phase },
        el('td', {}, String(call.turn)),
        el('td', {}, call.tool),
        el('td', { class: 'details' }, call.arguments),
        el('td', { class: call.phase === 'finished' ? '' : 'reject' }, call.phase.replace(/_/g, ' ')),
        el(
          'td',
          { class: 'details' },
          call.result === null
            ? ''
            : call.result.ok
              ? json(call.result.data)
              : `${call.result.code}: ${call.result.summary}`,
        ),
      ),
    ),
  );
  $('turns').replaceChildren(
    ...history.turns.map((turn) =>
      el(
        'div',
        { class: 'turn', 'data-turn': turn.turn },
        el('h3', {}, `turn ${turn.turn}`),
        ...turn.entries.map((entry) => {
          const [what, text] = entryText(entry);
          return el(
            'div',
            { class: 'message', 'data-kind': entry.kind },
            el('p', { class: 'small' }, `${what} · ${clock(entry.at)}`),
            el('pre', {}, text),
          );
        }),
      ),
    ),
  );
  $('history').hidden = false;
}

/** A copy says so, to everyone who sees it, with the task and step it was copied from. */
function renderFork(status) {
  $('fork-marker').hidden = !status.forkedFrom;
  if (status.forkedFrom)
    $('fork-marker').replaceChildren(
      'A copy (fork) of ',
      el('a', { href: `${base}/tasks/${encodeURIComponent(status.forkedFrom.taskId)}` }, status.forkedFrom.taskId),
      ` at step ${status.forkedFrom.step}.`,
    );
}

function renderOperator(status) {
  $('operator').hidden = false;
  const review = status.state === 'review_required' ? status.review : null;
  $('review-panel').hidden = review === null;
  if (review) $('review-summary').textContent = `${review.tool}: ${review.summary} (${review.reason})`;
  // The task retries by itself at the outage's wake-up time; an operator may ask sooner (one more model turn).
  $('model-wait-panel').hidden = status.state !== 'waiting_for_model';
  if (status.outage)
    $('model-wait').textContent =
      `The model is down (${status.outage.lastError}); attempt ${status.outage.attempts + 1} is due at ${clock(status.outage.wakeAt)}, when the task retries by itself. Asking now costs one more model turn of its budget.`;
}

async function refresh() {
  if (erased) return;
  try {
    const view = await get(path);
    renderFork(view.status);
    if (view.access === 'operator') renderOperator(view.status);
    renderHistory(await get(`${path}/history`));
  } catch {
    // Not the user's or an operator's history (an approver's view): the rest of the page says what it may.
  }
}

async function act(name, body, done) {
  $('operator-result').textContent = `${name}…`;
  try {
    const result = await post(`${path}/${name}`, body);
    $('operator-result').textContent = done(result);
    document.body.dataset.operated = name;
  } catch (error) {
    $('operator-result').textContent = `${name} refused: ${error.code}: ${error.message}`;
  }
  setTimeout(refresh, 100);
}

for (const button of document.querySelectorAll('[data-resolution]')) {
  button.addEventListener('click', () => {
    const resolution = button.dataset.resolution;
    const body = { resolution };
    const note = $('review-note').value.trim();
    if (note) body.note = note;
    if (resolution === 'happened') {
      try {
        body.result = JSON.parse($('review-result').value);
      } catch {
        $('operator-result').textContent = 'type the result the write gave, as JSON, first';
        return;
      }
    }
    act('review', body, (result) => `review → ${result.message || 'taken'} (now ${result.status.state})`);
  });
}

$('retry-model').addEventListener('click', () =>
  act('retry-model', {}, (result) => `retry → ${result.message || 'taken'} (now ${result.status.state})`),
);

$('fork-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const step = Number($('fork-step').value);
  if (!Number.isInteger(step) || step < 1) {
    $('operator-result').textContent =
      'type the step to copy at first (the number of audit entries, as time travel counts)';
    return;
  }
  act('fork', { step }, ({ status }) => `forked → ${status.taskId}: ${base}/tasks/${status.taskId}`);
});

$('erase-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const reason = $('erase-reason').value.trim();
  if (!reason) {
    $('operator-result').textContent = 'type the reason code first (gdpr_erasure...): it stays in the tombstone';
    return;
  }
  act('erase', { reason, ...($('erase-cancel').checked ? { cancelRunning: true } : {}) }, ({ tombstone }) => {
    erased = true;
    return `erased by ${tombstone.by} (${tombstone.reason}): ${tombstone.removed.audit} audit entries removed. Back to the console: ${base}/console`;
  });
});

await refresh();
setInterval(refresh, 3_000);
