/**
 * The relay's page: the Stately inspector UI in an iframe, fed over `postMessage` with the frames the relay sends
 * this page's WebSocket. The page connects back to the host it was loaded from (never a fixed `localhost`), with the
 * one-time token it was issued, and talks to the iframe at the inspector's origin only: frames are posted to that
 * origin, and only that frame's `@statelyai.connected` message starts the flow. It sends nothing to the relay.
 */

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
  </style>
</head>
<body>
  <iframe id="inspector" src="${attribute(inspectorUrl)}"></iframe>
  <script>
    const inspectorOrigin = ${scriptString(inspectorOrigin)};
    const iframe = document.getElementById('inspector');
    const buffer = [];
    let connected = false;
    const post = (frame) => iframe.contentWindow.postMessage(frame, inspectorOrigin);
    window.addEventListener('message', (e) => {
      if (e.source !== iframe.contentWindow || e.origin !== inspectorOrigin) return;
      if (e.data && e.data.type === '@statelyai.connected' && !connected) {
        connected = true;
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
