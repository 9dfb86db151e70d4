// The live task page: the chart with the path taken, the timeline, budgets and the pending confirmation, kept live
// over the task's Server-Sent Events (the browser resumes with Last-Event-ID on its own after a drop); step
// controls through the API; time travel to step N from the audit journal (GET /api/tasks/:id/replay?at=N).
import { drawChart } from './chart.js';
import { base, clock, el, get, json, post, session, showError } from './common.js';

const taskId = decodeURIComponent(location.pathname.split('/').pop() ?? '');
const path = `/api/tasks/${encodeURIComponent(taskId)}`;
const $ = (id) => document.getElementById(id);
const message = $('message');
let chart = null;
let view = null;
let travelAt = null;
let auditLength = 0;
let refreshTimer = null;

$('task-id').textContent = taskId;

function describe(entry) {
  switch (entry.kind) {
    case 'gate':
      return [
        `${entry.gate} gate`,
        entry.decision,
        [entry.tool, entry.code, entry.summary].filter(Boolean).join(' · '),
      ];
    case 'check_started':
      return [`${entry.gate} check`, 'asking', entry.tool];
    case 'tool_started':
      return [
        `${entry.effect} ${entry.tool}`,
        'started',
        `${JSON.stringify(entry.args)}${entry.idempotencyKey ? ` key ${entry.idempotencyKey.slice(0, 16)}…` : ''}`,
      ];
    case 'tool_finished':
      return [`${entry.tool}`, entry.code, `${entry.durationMs} ms, ${entry.attempts} attempt(s)`];
    case 'write_lookup':
      return [`lookup ${entry.tool}`, entry.result, `key ${entry.idempotencyKey.slice(0, 16)}…`];
    case 'confirmation':
      return [
        `confirmation ${entry.tool}`,
        entry.action,
        [entry.userId, entry.decidedAs, entry.code, entry.reason ? `"${entry.reason}"` : null]
          .filter(Boolean)
          .join(' · '),
      ];
    case 'task_stopped':
      return ['stop', entry.status, `${entry.reason.code}: ${entry.reason.message}`];
    case 'model_requested':
      return ['model', 'asked', ''];
    case 'model_output':
      return ['model', `${entry.calls} call(s)`, `${entry.usage.inputTokens + entry.usage.outputTokens} tokens`];
    case 'task_started':
      return ['start', entry.userId, entry.goal];
    case 'review':
      return [`review ${entry.tool}`, entry.action, entry.summary];
    case 'cancel_requested':
      return ['cancel', entry.deferred ? 'deferred' : 'requested', `${entry.by}: ${entry.reason}`];
    default:
      return [entry.kind, '', ''];
  }
}

function decisionClass(decision) {
  if (['pass', 'ok', 'granted', 'found', 'approved', 'done'].includes(decision)) return 'pass';
  if (
    ['reject', 'stop', 'refused', 'rejected', 'expired', 'failed', 'cancelled', 'not_found', 'conflict'].includes(
      decision,
    )
  )
    return 'reject';
  return '';
}

function addTimeline(data) {
  const [what, decision, details] = describe(data.entry);
  $('timeline').append(
    el(
      'tr',
      { 'data-seq': data.seq, 'data-kind': data.kind },
      el('td', {}, String(data.seq)),
      el('td', {}, String(data.entry.turn)),
      el('td', {}, what),
      el('td', { class: decisionClass(decision) }, decision),
      el('td', { class: 'details' }, details),
      el('td', { class: 'small' }, data.state ?? ''),
    ),
  );
  auditLength = Math.max(auditLength, data.seq + 1);
  $('travel-of').textContent = `of ${auditLength}`;
}

function renderBudget(used, limits) {
  $('budget').replaceChildren(
    el('tr', {}, el('th', {}, 'budget'), el('th', {}, 'used'), el('th', {}, 'limit')),
    ...Object.keys(used).map((key) =>
      el(
        'tr',
        {},
        el('td', {}, key),
        el('td', {}, String(used[key])),
        el('td', {}, limits ? String(limits[key]) : '?'),
      ),
    ),
  );
}

function renderPending(pending, decidable) {
  if (!pending) return $('pending').replaceChildren(el('p', { class: 'small' }, 'no confirmation pending'));
  $('pending').replaceChildren(
    ...[
      el(
        'p',
        { 'data-testid': 'pending-summary' },
        el('strong', {}, pending.summary ?? `${pending.tool} ${pending.argsHash}`),
      ),
      pending.args !== undefined ? el('pre', {}, json(pending.args)) : null,
      el(
        'p',
        { class: 'small' },
        `id ${pending.id} · args ${pending.argsHash} · ${pending.approverScope ? `approvers holding ${pending.approverScope}` : `by ${pending.userId ?? 'the requester'}`} · expires ${pending.expiresAt ? clock(pending.expiresAt) : '?'}`,
      ),
      decidable ? null : el('p', { class: 'small' }, '(as it was at this step)'),
    ].filter(Boolean),
  );
}

/** A sub-task's parent and a task's children (sub-tasks it started), each a link to its own page. */
function renderLinks(parent, children) {
  const link = (id) => el('a', { href: `${base}/tasks/${encodeURIComponent(id)}`, 'data-task': id }, id);
  const parts = [];
  if (parent) parts.push('sub-task of ', link(parent.taskId), ` (its ${parent.tool} call ${parent.callId})`);
  if (children.length > 0) {
    if (parts.length > 0) parts.push('; ');
    parts.push('sub-tasks: ');
    children.forEach((child, i) => {
      if (i > 0) parts.push(', ');
      const state = child.outcome ? `${child.outcome.status}, ${child.outcome.code}` : child.status;
      parts.push(link(child.childTaskId), ` (${child.tool}: ${state})`);
    });
  }
  $('links').replaceChildren(...parts);
}

/** Why a control the task's state offers is not this person's, in the words of the refusal it would get. */
const ACTION_WORDS = { confirm: 'confirm', reject: 'reject', cancel: 'cancel', answer: 'answer' };
const ACCESS_WORDS = {
  owner: 'your task',
  approver: 'waiting for your approval',
  decided: 'you decided its confirmation as an approver: you follow what your decision did',
  operator: "you operate this task's tenant: you may cancel it, resolve its review, erase it",
};

function renderLive() {
  const { status, may, access } = view;
  $('state').textContent = status.state;
  $('state').className = `badge ${status.state}`;
  $('goal').textContent = status.goal;
  renderLinks(status.parent ?? null, status.children ?? []);
  renderBudget(status.budget.used, status.budget.limits);
  renderPending(status.pendingConfirmation, true);
  $('outcome').textContent = status.outcome
    ? `${status.outcome.status}: ${status.outcome.reason.code} — ${status.outcome.reason.message}`
    : '—';
  // Only this person's controls: one the task offers to someone else is hidden, and the page says why.
  for (const button of document.querySelectorAll('[data-command]')) {
    const action = button.dataset.command;
    button.hidden = may.refused.some((r) => r.action === action);
    button.disabled = travelAt !== null || !may[action];
  }
  $('reject-reason-row').hidden = !may.reject;
  $('may-not').replaceChildren(
    ...may.refused.map((r) =>
      el(
        'li',
        { 'data-action': r.action, 'data-code': r.code },
        `You cannot ${ACTION_WORDS[r.action] ?? r.action} here: ${r.message} (${r.code}).`,
      ),
    ),
  );
  $('access').textContent = ACCESS_WORDS[access] ?? access;
  document.body.dataset.access = access;
}

async function refresh() {
  try {
    view = await get(path);
    const { replay, auditLength: length } = await get(`${path}/replay${travelAt === null ? '' : `?at=${travelAt}`}`);
    auditLength = Math.max(auditLength, length);
    $('travel-of').textContent = `of ${auditLength}`;
    if (travelAt === null) {
      renderLive();
      $('travel-step').value = String(length);
      $('travel-note').textContent = 'live';
    } else {
      $('state').textContent = `${replay.status} (step ${replay.step})`;
      renderBudget(replay.budget.used, replay.budget.limits);
      renderPending(replay.pendingConfirmation, false);
      $('outcome').textContent = replay.outcome ? `${replay.outcome.status}: ${replay.outcome.reason.code}` : '—';
      $('travel-note').textContent =
        `showing the task after its first ${replay.step} audit entries (state ${replay.state ?? 'not started'}); "live" goes back`;
      for (const button of document.querySelectorAll('[data-command]')) button.disabled = true;
    }
    chart?.highlight({
      visited: replay.visited,
      current: replay.state,
      transitions: replay.transitions,
      final: replay.outcome !== null,
    });
    document.body.dataset.state = view.status.state;
  } catch (error) {
    showError(message, error);
  }
}

function scheduleRefresh() {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(refresh, 60);
}

async function command(name) {
  const status = view.status;
  const pending = status.pendingConfirmation;
  const reason = $('reject-reason').value.trim();
  if (name === 'reject' && reason === '') {
    $('control-result').textContent = 'type the reason to reject first: it goes to the model and into the audit';
    $('reject-reason').focus();
    return;
  }
  const body =
    name === 'confirm'
      ? { confirmationId: pending.id, argsHash: pending.argsHash }
      : name === 'reject'
        ? { confirmationId: pending.id, reason }
        : name === 'answer'
          ? { text: $('answer-text').value }
          : name === 'cancel'
            ? { reason: 'cancelled on the live page' }
            : {};
  $('control-result').textContent = `${name}…`;
  try {
    const result = await post(`${path}/${name}`, body);
    $('control-result').textContent = `${name} → ${result.message || 'accepted'} (now ${result.status.state})`;
  } catch (error) {
    $('control-result').textContent = `${name} refused: ${error.code}: ${error.message}`;
  }
  scheduleRefresh();
}

for (const button of document.querySelectorAll('.controls [data-command]'))
  button.addEventListener('click', () => command(button.dataset.command));
$('answer-form').addEventListener('submit', (event) => {
  event.preventDefault();
  command('answer');
});
$('travel-form').addEventListener('submit', (event) => {
  event.preventDefault();
  travelAt = Math.max(0, Number($('travel-step').value) || 0);
  refresh();
});
$('travel-live').addEventListener('click', () => {
  travelAt = null;
  refresh();
});

// The model's text while it is written (streaming models only): redacted by the server, never stored, shown until the
// turn's journal entry (the record) arrives, or cleared when its attempt failed.
const writing = { key: '', text: '' };
function showWriting(data) {
  const key = `${data.turn}:${data.attempt}`;
  if (data.kind !== 'text') return hideWriting();
  if (key !== writing.key) Object.assign(writing, { key, text: '' });
  writing.text = data.replace ? data.text : writing.text + data.text;
  const tail = writing.text.length > 400 ? `…${writing.text.slice(-400)}` : writing.text;
  $('writing').textContent = `model is writing… ${tail}`;
  $('writing').hidden = false;
}
function hideWriting() {
  Object.assign(writing, { key: '', text: '' });
  $('writing').hidden = true;
  $('writing').textContent = '';
  hideProposing();
}

// The tool calls the model is writing: unvetted proposals (the chart checks them once the turn is whole), labelled
// as the server labels them, redacted by it, never stored; cleared with the writing line.
const proposing = { key: '', calls: new Map() };
function showProposing(data) {
  const key = `${data.turn}:${data.attempt}`;
  if (key !== proposing.key) Object.assign(proposing, { key, calls: new Map() });
  const call = proposing.calls.get(data.index) ?? { name: null, text: '' };
  call.name = data.name ?? call.name;
  call.text = data.replace ? data.text : call.text + data.text;
  proposing.calls.set(data.index, call);
  const lines = [...proposing.calls.values()].map((c) => {
    const args = c.text.length > 300 ? `${c.text.slice(0, 300)}…` : c.text;
    return `${c.name ?? '(tool not named yet)'} ${args}`;
  });
  $('proposing').textContent = `${data.label ?? 'proposed, not yet checked'}: ${lines.join('\n')}`;
  $('proposing').hidden = false;
}
function hideProposing() {
  Object.assign(proposing, { key: '', calls: new Map() });
  $('proposing').hidden = true;
  $('proposing').textContent = '';
}

/** The id of the last event received: a stream the page opens again resumes after it (`lastEventId`). */
let lastEventId = '';
/** Delay before the page opens the stream again itself, after the browser gave it up; grows to 10 s. */
let reopenMs = 1000;
/** Answers of the task's status URL that refuse for good: not visible to the caller (403), unknown or erased (404), gone. */
const REFUSED_FOR_GOOD = new Set([403, 404, 410]);

/**
 * After the browser gave the stream up, asks the task's status URL why before opening the stream again. A refusal for
 * good (403, 404, 410: the task was erased, is unknown, or is no longer the caller's to see) ends the page's retries
 * and says why; anything else (a closing server's or a proxy's 5xx, no answer at all, or the task there again) opens
 * the stream again after `reopenMs`, which doubles up to 10 s.
 */
async function reopenUnlessRefused() {
  try {
    await get(path);
  } catch (error) {
    if (REFUSED_FOR_GOOD.has(error.httpStatus)) {
      document.body.dataset.live = 'refused';
      $('live').textContent =
        `the server refuses this task's events for good (${error.httpStatus} ${error.code}: ${error.message}): ` +
        'the page no longer follows it; reload to try again';
      return;
    }
  }
  setTimeout(connect, reopenMs);
  reopenMs = Math.min(reopenMs * 2, 10_000);
}

function connect() {
  const query = lastEventId ? `?lastEventId=${encodeURIComponent(lastEventId)}` : '';
  const source = new EventSource(`${base}${path}/events${query}`, { withCredentials: true });
  // A named event of the stream, its id noted first.
  const on = (name, handler) =>
    source.addEventListener(name, (event) => {
      if (event.lastEventId) lastEventId = event.lastEventId;
      handler(event);
    });
  const onEntry = (event) => {
    const data = JSON.parse(event.data);
    hideWriting();
    addTimeline(data);
    scheduleRefresh();
  };
  on('model_text', (event) => showWriting(JSON.parse(event.data)));
  on('model_call', (event) => showProposing(JSON.parse(event.data)));
  for (const name of ['gate', 'check', 'confirmation', 'tool', 'lookup', 'review', 'stop', 'entry']) on(name, onEntry);
  on('status', scheduleRefresh);
  // Set by `shutdown` until the stream is open again, so the error that follows the server's close keeps saying why.
  let restarting = false;
  source.addEventListener('open', () => {
    restarting = false;
    reopenMs = 1000;
    delete document.body.dataset.live;
    $('live').textContent = 'live: following the task events';
  });
  on('end', () => {
    source.close();
    hideWriting();
    $('live').textContent = 'the task has ended: every event received';
    document.body.dataset.ended = 'true';
    scheduleRefresh();
  });
  // The server is closing (a deploy): the browser reconnects by itself, to this or another instance, and resumes.
  on('shutdown', () => {
    restarting = true;
    document.body.dataset.live = 'restarting';
    $('live').textContent = 'the server is restarting: reconnecting…';
  });
  source.addEventListener('error', () => {
    if (source.readyState === EventSource.CLOSED && document.body.dataset.ended !== 'true') {
      // The browser gave the stream up (an answer that was not a stream: a closing server's 503, a proxy's error
      // page, or a refusal). A restart or a deploy must not leave the page dead: it opens the stream again itself,
      // resuming after the last event it received, unless the server refuses the task for good.
      source.close();
      void reopenUnlessRefused();
    }
    if (restarting) return;
    document.body.dataset.live = 'reconnecting';
    $('live').textContent = 'reconnecting (the stream resumes after the last event received)…';
  });
}

try {
  const { principal, stepping } = await session();
  document.querySelector('[data-testid="who"]').textContent =
    `signed in as ${principal.userId} @ ${principal.tenantId}${stepping ? ' · this service steps its model: "next" lets it take a turn' : ''}`;
  chart = drawChart($('chart'), await get('/api/chart'));
  await refresh();
  connect();
} catch (error) {
  showError(message, error);
}
