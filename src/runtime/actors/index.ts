/**
 * The invoked actors of the agent machine, bound to real tools and a real model, by the names the chart invokes.
 * They never throw for expected failures: every outcome comes back as data the machine's guards route on.
 */
import { ACTORS } from '../../../machines/actors.js';
import type { ActorHost } from '../actorHost.js';
import { checkActor } from './checks.js';
import { lookupActor } from './lookup.js';
import { modelActor } from './model.js';
import { readsActor } from './reads.js';
import { recheckActor } from './recheck.js';
import { writeActor } from './write.js';
import { summariseActor } from './summarise.js';

export { toModelEvent } from './model.js';

export function createRuntimeActors(host: ActorHost) {
  return {
    [ACTORS.model]: modelActor(host),
    [ACTORS.validate]: checkActor(host, 'validate'),
    [ACTORS.authorize]: checkActor(host, 'authorize'),
    [ACTORS.recheck]: recheckActor(host),
    [ACTORS.reads]: readsActor(host),
    [ACTORS.write]: writeActor(host),
    [ACTORS.lookup]: lookupActor(host),
    [ACTORS.summarise]: summariseActor(host),
  };
}

export type RuntimeActors = ReturnType<typeof createRuntimeActors>;
