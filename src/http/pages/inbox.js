// The approval inbox: GET /api/inbox every few seconds; approve or reject through the API with the confirmation id
// and the arguments hash; the time left counts down.
import { base, clock, el, get, json, post, session, showError, timeLeft } from './common.js';

const items = document.getElementById('items');
const message = document.getElementById('message');
let current = [];
/** Decisions made on this page: kept in view after their items leave the inbox. */
const decided = [];
let loadedAt = Date.now();
let rendered = false;

function signature(list) {
  return list.map((item) => `${item.confirmationId}:${item.argsHash}:${item.approvals.given}`).join('|');
}

async function load() {
  try {
    const { items: list } = await get('/api/inbox');
    const changed = signature(list) !== signature(current) || rendered === false;
    current = list;
    loadedAt = Date.now();
    // Re-drawn only when the list changed, so a button is never replaced under the user's pointer.
    if (changed) render();
    else
      for (const item of list)
        items
          .querySelector(`[data-task="${CSS.escape(item.taskId)}"] [data-left]`)
          ?.setAttribute('data-left', item.timeLeftMs);
  } catch (error) {
    showError(message, error);
  }
}

function render() {
  rendered = true;
  const done = decided.map((d) =>
    el(
      'p',
      { class: `result ${d.ok ? 'ok' : 'refused'}`, 'data-testid': 'decided' },
      d.text,
      ' ',
      el('a', { href: `${base}/tasks/${encodeURIComponent(d.taskId)}` }, 'watch the task live'),
    ),
  );
  const open = current.filter((item) => !decided.some((d) => d.ok && d.confirmationId === item.confirmationId));
  items.replaceChildren(
    ...done,
    ...(open.length === 0
      ? [el('p', { class: 'empty', 'data-testid': 'empty' }, 'Nothing waits for your decision.')]
      : open.map(card)),
  );
}

function card(item) {
  const result = el('p', { class: 'result', 'data-testid': 'result' });
  const decide = async (kind) => {
    for (const button of node.querySelectorAll('button')) button.disabled = true;
    try {
      const body =
        kind === 'confirm'
          ? { confirmationId: item.confirmationId, argsHash: item.argsHash }
          : { confirmationId: item.confirmationId, reason: 'rejected in the inbox' };
      const answer = await post(`/api/tasks/${encodeURIComponent(item.taskId)}/${kind}`, body);
      const text = `${kind === 'confirm' ? 'Approved' : 'Rejected'} "${item.summary}": ${answer.message || 'accepted'} (task ${item.taskId} now ${answer.status.state})`;
      decided.unshift({ ok: true, text, taskId: item.taskId, confirmationId: item.confirmationId });
      render();
    } catch (error) {
      result.textContent = `Refused: ${error.code}: ${error.message}`;
      result.className = 'result refused';
      for (const button of node.querySelectorAll('button')) button.disabled = false;
    }
  };
  const left = el('span', { class: 'time-left', 'data-testid': 'time-left', 'data-left': item.timeLeftMs });
  left.textContent = timeLeft(item.timeLeftMs);
  const node = el(
    'article',
    { class: 'card', 'data-testid': 'inbox-item', 'data-task': item.taskId },
    el('h2', { 'data-testid': 'summary' }, item.summary),
    el(
      'p',
      { class: 'meta' },
      'asked by ',
      el('strong', {}, item.requestedBy),
      ` at ${clock(item.requestedAt)} · `,
      item.decideAs === 'approver'
        ? `you decide as an approver (${item.approverScope}; ${item.approvals.given} of ${item.approvals.required} given)`
        : 'you confirm your own request',
      ' · time left ',
      left,
    ),
    el('p', { class: 'goal' }, item.goal),
    el(
      'p',
      { class: 'why', 'data-testid': 'why' },
      `Asked because: ${item.reasons.map((r) => WHY[r] ?? r).join('; ')} · risk: ${item.risk.replace('_', ' ')}`,
    ),
    el('h3', {}, `Exactly what will run: ${item.tool}`),
    el('pre', { 'data-testid': 'args' }, json(item.args)),
    el(
      'p',
      { class: 'hash' },
      'arguments hash ',
      el('code', {}, item.argsHash),
      ' · confirmation ',
      el('code', {}, item.confirmationId),
    ),
    earlier(item),
    el(
      'div',
      { class: 'actions' },
      el('button', { class: 'approve', 'data-testid': 'approve', onclick: () => decide('confirm') }, 'Approve'),
      el('button', { class: 'reject', 'data-testid': 'reject', onclick: () => decide('reject') }, 'Reject'),
      el(
        'a',
        { href: `${base}/tasks/${encodeURIComponent(item.taskId)}`, 'data-testid': 'watch' },
        'watch the task live',
      ),
    ),
    result,
  );
  return node;
}

/** Why the host asks, in the approver's words (`ConfirmationReason`). */
const WHY = {
  tool_rule: "the tool's rule asks for these arguments",
  write_default: 'a write is confirmed unless its tool waives it',
  irreversible: 'it cannot be undone',
  high_risk: 'the tool is high-risk',
  moves_money: 'it moves money',
  rule_of_two: 'the task saw untrusted input and holds sensitive data',
};

function earlier(item) {
  if (item.earlier.length === 0)
    return el('p', { class: 'earlier none' }, `No earlier proposal of ${item.tool} in this task.`);
  return el(
    'div',
    { class: 'earlier' },
    el('h3', {}, `Earlier proposals of ${item.tool} in this task`),
    el(
      'table',
      { 'data-testid': 'earlier' },
      el(
        'thead',
        {},
        el('tr', {}, el('th', {}, 'turn'), el('th', {}, 'what became of it'), el('th', {}, 'what differs from now')),
      ),
      el(
        'tbody',
        {},
        ...item.earlier.map((p) =>
          el(
            'tr',
            {},
            el('td', {}, String(p.turn)),
            el(
              'td',
              { class: p.result === 'ok' ? 'pass' : 'reject' },
              p.result ?? 'no result',
              p.summary ? el('div', { class: 'small' }, p.summary) : null,
            ),
            el(
              'td',
              {},
              p.differences.length === 0
                ? 'the same arguments'
                : el(
                    'ul',
                    {},
                    ...p.differences.map((d) =>
                      el(
                        'li',
                        { 'data-testid': 'difference' },
                        el('code', {}, d.field),
                        ': ',
                        el('del', {}, JSON.stringify(d.was)),
                        ' → ',
                        el('ins', {}, JSON.stringify(d.now)),
                      ),
                    ),
                  ),
            ),
          ),
        ),
      ),
    ),
  );
}

// Counted from the server's time left when the list was loaded (the browser's clock may differ from the server's).
setInterval(() => {
  for (const node of items.querySelectorAll('[data-left]'))
    node.textContent = timeLeft(Number(node.dataset.left) - (Date.now() - loadedAt));
}, 1000);

const { principal } = await session().catch((error) => {
  showError(message, error);
  throw error;
});
document.querySelector('[data-testid="who"]').textContent = `signed in as ${principal.userId} @ ${principal.tenantId}`;
await load();
setInterval(load, 3000);
