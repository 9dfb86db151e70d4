// The approval inbox: GET /api/inbox every few seconds; approve or reject (with a reason the person types) through
// the API with the confirmation id and the arguments hash; the time left counts down. Each card shows the money at
// stake, the mandate, why it was asked and what changed since earlier proposals; a decision made here stays in view
// with what it did (the task's state, then its outcome), read from the task the approver keeps access to.
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
    await followDecided();
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

/** What each decision made here did: the task's state now, and its outcome once it ended. */
async function followDecided() {
  for (const d of decided) {
    if (d.outcome) continue;
    try {
      const { status } = await get(`/api/tasks/${encodeURIComponent(d.taskId)}`);
      const outcome = status.outcome
        ? `${status.outcome.status}: ${status.outcome.reason.code} — ${status.outcome.reason.message}`
        : null;
      if (outcome !== d.outcome || status.state !== d.state) {
        d.state = status.state;
        d.outcome = outcome;
        rendered = false;
      }
    } catch (error) {
      d.state = `not readable (${error.code})`;
    }
  }
}

function render() {
  rendered = true;
  const done = decided.map((d) =>
    el(
      'div',
      { class: `result ${d.ok ? 'ok' : 'refused'}`, 'data-testid': 'decided', 'data-task': d.taskId },
      el('p', {}, d.text),
      el(
        'p',
        { 'data-testid': 'decided-outcome' },
        d.outcome
          ? `Outcome: ${d.outcome}`
          : `The task is ${d.state ?? 'running'}; its outcome shows here when it ends.`,
      ),
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
  const reason = el('input', {
    'data-testid': 'reject-reason',
    placeholder: 'reason to reject (required; the requester and the audit see it)',
    maxlength: 500,
    disabled: !item.may.reject,
  });
  const decide = async (kind) => {
    const why = reason.value.trim();
    if (kind === 'reject' && why === '') {
      result.textContent = 'Type the reason to reject first.';
      result.className = 'result refused';
      reason.focus();
      return;
    }
    for (const button of node.querySelectorAll('button')) button.disabled = true;
    try {
      const body =
        kind === 'confirm'
          ? { confirmationId: item.confirmationId, argsHash: item.argsHash }
          : { confirmationId: item.confirmationId, reason: why };
      const answer = await post(`/api/tasks/${encodeURIComponent(item.taskId)}/${kind}`, body);
      const text = `${kind === 'confirm' ? 'Approved' : `Rejected (${why})`} "${item.summary}": ${answer.message || 'accepted'} (task ${item.taskId} now ${answer.status.state})`;
      decided.unshift({
        ok: true,
        text,
        taskId: item.taskId,
        confirmationId: item.confirmationId,
        state: answer.status.state,
        outcome: null,
      });
      await followDecided();
      render();
    } catch (error) {
      result.textContent = `Refused: ${error.code}: ${error.message}`;
      result.className = 'result refused';
      node.querySelector('[data-testid=approve]').disabled = !item.may.confirm;
      node.querySelector('[data-testid=reject]').disabled = !item.may.reject;
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
    stake(item),
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
      el(
        'button',
        { class: 'approve', 'data-testid': 'approve', disabled: !item.may.confirm, onclick: () => decide('confirm') },
        'Approve',
      ),
      reason,
      el(
        'button',
        { class: 'reject', 'data-testid': 'reject', disabled: !item.may.reject, onclick: () => decide('reject') },
        'Reject',
      ),
      el(
        'a',
        { href: `${base}/tasks/${encodeURIComponent(item.taskId)}`, 'data-testid': 'watch' },
        'watch the task live',
      ),
    ),
    ...item.may.refused.map((r) =>
      el('p', { class: 'not-yours', 'data-testid': 'may-not' }, `You cannot ${r.action}: ${r.message} (${r.code}).`),
    ),
    result,
  );
  return node;
}

/** "refund · max_amount_cents: 45000 · order_id: \"O-1002\"": the kind, then each term as recorded. */
function mandateText({ kind, terms }) {
  const fields =
    terms && typeof terms === 'object' && !Array.isArray(terms)
      ? Object.entries(terms).map(([field, value]) => `${field}: ${JSON.stringify(value)}`)
      : [JSON.stringify(terms)];
  return [kind, ...fields].join(' · ');
}

/** "450.00", from minor units (the demo's currency has two decimals). */
function money(minor) {
  return (minor / 100).toFixed(2);
}

/** What is at stake: the money this call moves and the task's budget, the mandate, and the risk class. */
function stake(item) {
  const { amount, used, limit } = item.money;
  return el(
    'dl',
    { class: 'stake', 'data-testid': 'stake' },
    el('dt', {}, 'amount'),
    el(
      'dd',
      { 'data-testid': 'amount' },
      amount === null ? 'not known from the arguments shown' : money(amount),
      ` · this task moved ${money(used)} so far${limit === null ? '' : ` of at most ${money(limit)}`}`,
    ),
    el('dt', {}, 'mandate'),
    el('dd', { 'data-testid': 'mandate' }, item.mandate ? mandateText(item.mandate) : 'none (the goal only)'),
    el('dt', {}, 'risk'),
    el('dd', { 'data-testid': 'risk' }, item.risk.replace('_', ' ')),
  );
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
