// Shared by the service's pages: the API base, the session (with its CSRF token), JSON calls, and a DOM builder
// that only ever sets text (never HTML), so nothing a task holds can inject markup.
export const base = document.querySelector('meta[name="sca-base"]')?.getAttribute('content') ?? '';

let sessionPromise = null;

/** The signed-in caller: { principal, csrfToken, stepping }. */
export function session() {
  sessionPromise ??= request('GET', '/api/session').catch((error) => {
    sessionPromise = null;
    throw error;
  });
  return sessionPromise;
}

async function request(method, path, body, csrfToken) {
  const headers = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (csrfToken) headers['x-csrf-token'] = csrfToken;
  const response = await fetch(base + path, {
    method,
    headers,
    credentials: 'same-origin',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = new Error(data.message || `${response.status} ${response.statusText}`);
    error.code = data.code || String(response.status);
    error.httpStatus = response.status;
    throw error;
  }
  return data;
}

/** GET a JSON resource of the API. */
export function get(path) {
  return request('GET', path);
}

/**
 * POST a decision: always JSON, always with the session's CSRF token. A token the server no longer knows (it
 * restarted without a fixed `csrfSecret`, or this page was answered by another instance) is refused before anything
 * happens, so the page fetches the session's token again, once, and sends the same request once more.
 */
export async function post(path, body = {}) {
  const { csrfToken } = await session();
  try {
    return await request('POST', path, body, csrfToken);
  } catch (error) {
    if (error.code !== 'csrf_token_invalid') throw error;
    sessionPromise = null;
    const fresh = await session();
    return request('POST', path, body, fresh.csrfToken);
  }
}

/** el('div', { class: 'x', 'data-testid': 'y', onclick: fn }, 'text', child...) */
export function el(tag, attributes = {}, ...children) {
  const node = tag.startsWith('svg:')
    ? document.createElementNS('http://www.w3.org/2000/svg', tag.slice(4))
    : document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function json(value) {
  return JSON.stringify(value, null, 2);
}

export function clock(ms) {
  return new Date(ms).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
}

/** "4 min 05 s", "expired". */
export function timeLeft(ms) {
  if (ms <= 0) return 'expired';
  const s = Math.ceil(ms / 1000);
  const m = Math.floor(s / 60);
  return m > 0 ? `${m} min ${String(s % 60).padStart(2, '0')} s` : `${s} s`;
}

export function showError(target, error) {
  target.replaceChildren(
    el('p', { class: 'error', role: 'alert', 'data-testid': 'error' }, `${error.code ?? 'error'}: ${error.message}`),
  );
}
