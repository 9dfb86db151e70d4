/**
 * A process that uses the Stately inspection and must exit on its own: it starts the relay, prints
 * `READY <page url>`, waits for `go` on stdin (so the test can connect a viewer that stays connected), runs a demo
 * scenario with the inspection attached, stops it, prints `STOPPED <active handles>` (a moment later) and then does nothing more.
 * If anything (a reconnect timer, a socket, the server) were left behind, the process would not exit.
 */
import { createInterface } from 'node:readline';
import { scenarios } from '../../examples/booking/scenarios.js';
import { createStatelyInspection } from '../../src/inspect/statelyInspector.js';
import { MemoryStore } from '../../src/store/memoryStore.js';

const inspection = await createStatelyInspection({ port: 0 });
console.log(`READY ${inspection.url}`);
const rl = createInterface({ input: process.stdin });
for await (const line of rl) if (line.trim() === 'go') break;
rl.close();
process.stdin.destroy();
const result = await scenarios.normal({ store: new MemoryStore(), inspect: inspection.inspect });
console.log(`RESULT ${result.status.state}`);
await inspection.stop();
// Let closing handles finish closing (sockets and servers close asynchronously), then list what is still alive.
await new Promise((resolve) => setTimeout(resolve, 100));
console.log(`STOPPED ${JSON.stringify(process.getActiveResourcesInfo().filter((r) => r !== 'TTYWrap'))}`);
