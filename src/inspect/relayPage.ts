/**
 * The relay's page: the Stately inspector UI in an iframe, fed over `postMessage` with the frames the relay sends
 * this page's WebSocket. The page connects back to the host it was loaded from (never a fixed `localhost`), with the
 * one-time token it was issued, and talks to the iframe at the inspector's origin only: frames are posted to that
 * origin, and only that frame's `@statelyai.connected` message starts the flow. It sends nothing to the relay.
 *
 * Offline (or with stately.ai blocked) the frame never says it is connected and would stay blank: after
 * `OFFLINE_NOTICE_MS` the page says so, and points to what works without the network (the service's own task
 * pages and the generated diagram). The notice goes away if the frame connects later.
 */

/** How long the page waits for the inspector frame before saying it did not answer. */
export const OFFLINE_NOTICE_MS = 8_000;

/** Escapes a value for a JavaScript string literal inside an HTML `<script>` (no `</script>` breakout). */
function scriptString(value: string): string {
  return JSON.stringify(value).replace(/</g, '\\u003c').replace(/>/g, '\\u003e').replace(/&/g, '\\u0026');
}

function attribute(value: string): string {
  return value.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');
}

export function relayPage(inspectorUrl: string, token: string): string {
  const inspectorOrigin = new URL(inspectorUrl).origin;
  return `<!DOCTYPE html>
<html>
<head>
  <meta charset="utf-8">
  <title>Stately Inspector</title>
  <style>
    * { margin: 0; padding: 0; }
    html, body { height: 100%; }
    iframe { width: 100%; height: 100%; border: none; }
    #offline { position: fixed; top: 0; left: 0; right: 0; padding: 12px 16px; font: 14px/1.4 system-ui, sans-serif;
      background: #fff4e5; color: #5f3b00; border-bottom: 1px solid #f0c36d; }
  </style>
</head>
<body>
  <div id="offline" role="status" hidden>
    The Stately inspector at ${attribute(inspectorOrigin)} did not answer: it is loaded from the network, so offline
    (or with that site blocked) this page stays blank. The task pages of the service (<code>/tasks/&lt;taskId&gt;</code>,
    the operator console at <code>/console</code>) and the diagrams of <code>npm run visualize</code> work without it.
  </div>
  <iframe id="inspector" src="${attribute(inspectorUrl)}"></iframe>
  <script>
    const inspectorOrigin = ${scriptString(inspectorOrigin)};
    const iframe = document.getElementById('inspector');
    const buffer = [];
    let connected = false;
    const offline = document.getElementById('offline');
    setTimeout(() => { if (!connected) offline.hidden = false; }, ${OFFLINE_NOTICE_MS});
    const post = (frame) => iframe.contentWindow.postMessage(frame, inspectorOrigin);
    window.addEventListener('message', (e) => {
      if (e.source !== iframe.contentWindow || e.origin !== inspectorOrigin) return;
      if (e.data && e.data.type === '@statelyai.connected' && !connected) {
        connected = true;
        offline.hidden = true;
        buffer.splice(0).forEach(post);
      }
    });
    const scheme = location.protocol === 'https:' ? 'wss://' : 'ws://';
    const ws = new WebSocket(scheme + location.host + '/?token=' + encodeURIComponent(${scriptString(token)}));
    ws.onmessage = (event) => {
      const frame = JSON.parse(event.data);
      if (connected) post(frame);
      else buffer.push(frame);
    };
  </script>
</body>
</html>`;
}
