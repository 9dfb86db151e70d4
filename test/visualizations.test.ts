import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AnyStateNode } from 'xstate';
import { describe, expect, it } from 'vitest';
import { agentMachine } from '../machines/agentMachine.js';
import { DIAGRAM_PAGE, VISUALIZATIONS_DIR, embedDiagram, renderVisualizations } from '../scripts/visualize.js';

/** Named guards of the chart, read from the definition independently of the script (composed ones unfolded). */
function guardNames(guard: unknown): string[] {
  if (guard === undefined || guard === null) return [];
  if (typeof guard === 'string') return [guard];
  const inner = (guard as { guards?: unknown[] }).guards;
  if (Array.isArray(inner)) return inner.flatMap(guardNames);
  const type = (guard as { type?: unknown }).type;
  return typeof type === 'string' ? [type] : [];
}

function walk(node: AnyStateNode): AnyStateNode[] {
  return [node, ...Object.values(node.states).flatMap(walk)];
}

const nodes = walk(agentMachine.root);
const usedGuards = [
  ...new Set(
    nodes.flatMap((node) =>
      [...(node.always ?? []), ...[...node.transitions.values()].flat()].flatMap((t) => guardNames(t.guard)),
    ),
  ),
].sort();

describe('visualizations', () => {
  const generated = renderVisualizations();

  it('docs/machine.md embeds the current diagram, and the README links to it', () => {
    const page = readFileSync(DIAGRAM_PAGE, 'utf8');
    expect(
      embedDiagram(page, generated['agentMachine.mmd']!) === page,
      'the diagram in docs/machine.md is stale: run npm run visualize',
    ).toBe(true);
    expect(readFileSync(join(import.meta.dirname, '..', 'README.md'), 'utf8')).toContain('](docs/machine.md)');
  });

  it('notices a stale embedded diagram', () => {
    const page = readFileSync(DIAGRAM_PAGE, 'utf8');
    const stale = embedDiagram(page, generated['agentMachine.mmd']!.replace('waitingForModel', 'waitingForTheModel'));
    expect(embedDiagram(stale, generated['agentMachine.mmd']!)).not.toBe(stale);
    expect(() => embedDiagram('# no markers', generated['agentMachine.mmd']!)).toThrow(
      /docs\/machine\.md needs the markers/,
    );
  });

  it.each(Object.keys(generated))('committed %s matches the machine definition', (name) => {
    let committed: string | null;
    try {
      committed = readFileSync(join(VISUALIZATIONS_DIR, name), 'utf8');
    } catch {
      committed = null;
    }
    if (committed !== generated[name]) {
      expect.fail(`visualizations are stale: run npm run visualize (visualizations/${name} differs from the machine)`);
    }
  });

  it('is deterministic', () => {
    expect(renderVisualizations()).toEqual(generated);
  });

  it('names every guard the chart uses in the Mermaid diagram', () => {
    const mermaid = generated['agentMachine.mmd']!;
    expect(usedGuards.length).toBeGreaterThan(20);
    const missing = usedGuards.filter((name) => !new RegExp(`\\b${name}\\b`).test(mermaid));
    expect(missing).toEqual([]);
  });

  it('shows every state, marks final states and notes invoke sources', () => {
    const mermaid = generated['agentMachine.mmd']!;
    for (const node of nodes.filter((n) => n !== agentMachine.root)) {
      const id = node.path.join('_');
      expect(mermaid, `state ${node.path.join('.')}`).toMatch(new RegExp(`state ("${node.key}" as ${id}|${id} \\{)`));
      if (node.type === 'final') expect(mermaid).toContain(`${id} --> [*]`);
      for (const invoke of node.invoke)
        expect(mermaid).toContain(`${id} : invokes ${invoke.src as string} as ${invoke.id}`);
    }
  });

  it('labels a guarded edge with its event and composed guard', () => {
    const mermaid = generated['agentMachine.mmd']!;
    expect(mermaid).toContain('thinking --> reasking: model.toolsProposed [not hasPairableCallIds]');
    expect(mermaid).toContain('[needsConfirmation and not isConfirmedForExactArguments]');
  });

  it('shows each gate where it refuses: one ordered list of guards, asynchronous business and resource permission as states', () => {
    const mermaid = generated['agentMachine.mmd']!;
    expect(mermaid).toContain(
      'vetting_judging --> vetting_judging: always [not doArgumentsMatchSchema] / refuseForSchema',
    );
    expect(mermaid).toContain(
      'vetting_judging --> vetting_judging: always [not isWithinMandate] / acceptArguments, refuseForMandate',
    );
    expect(mermaid).toContain(
      'vetting_judging --> stopping: always [isRepeatOfDeniedCall and stopsOnRepeatedDenial] / acceptArguments, stopForRepeatedDenial',
    );
    expect(mermaid).toContain(
      'vetting_validating --> vetting_judging: xstate.done.actor.validate [not isBusinessValid] / refuseForBusiness',
    );
    expect(mermaid).toContain(
      'vetting_judging --> vetting_judging: always [not hasScopesForTool] / acceptArguments, passMandate, passBusiness, refuseForPermission',
    );
    expect(mermaid).toContain(
      'vetting_authorizing --> vetting_judging: xstate.done.actor.authorize [not isAuthorized] / refuseForPermission',
    );
    expect(mermaid).toContain(
      'executing_awaitingConfirmation --> executing_awaitingConfirmation: user.confirmed [not (isFromConfirmingUser and isNotSelfApproval and holdsApproverScope and isFirstDecisionOfApprover)] / refuseConfirmation (stays)',
    );
    expect(mermaid).toContain('executing_awaitingConfirmation : tags waiting, confirmation');
  });

  it('shows every stop passing through stopping, where compensations start, and the final state it names', () => {
    const mermaid = generated['agentMachine.mmd']!;
    expect(mermaid).toContain('stopping --> vetting: always [mustCompensate] / beginCompensation');
    expect(mermaid).toContain('stopping --> failed: always [stoppedAsFailed]');
    expect(mermaid).toContain('stopping --> cancelled: always [stoppedAsCancelled]');
    expect(mermaid).toContain('stopping --> budgetExhausted: always [else]');
    expect(mermaid).toContain(
      'executing_selecting --> stopping: always [isBatchComplete and isUnwinding] / finishCompensation',
    );
    // Only a met goal and an answer end without passing through it.
    expect(mermaid).not.toMatch(/--> (failed|cancelled|budgetExhausted): (?!always \[stopped|always \[else\])/);
  });

  it('shows the re-check before a write, the review desk and the outage wait', () => {
    const mermaid = generated['agentMachine.mmd']!;
    expect(mermaid).toContain('executing_selecting --> executing_rechecking: always [isNextStepWrite] / startRecheck');
    expect(mermaid).toContain(
      'executing_rechecking_arguments --> executing_selecting: always [not areArgumentsIntact] / refuseChangedArguments',
    );
    expect(mermaid).toContain(
      'executing_rechecking_hooks --> executing_selecting: xstate.done.actor.recheck [not holdsScopesNow] / refuseAtRecheck',
    );
    expect(mermaid).toContain(
      'executing_rechecking_hooks --> executing_writing: xstate.done.actor.recheck [else] / startWrite',
    );
    expect(mermaid).toContain(
      'executing_reconciling --> reviewRequired: xstate.done.actor.lookup [else] / holdForReview',
    );
    expect(mermaid).toContain(
      'reviewRequired --> executing_recheckingResend: review.resolved [isResolvedAsRetry and isHeldWriteRetrySafe and hasBudgetForRetry and not isCancelRequested and (not isUserAway or isUnwinding)] / prepareReviewedResend',
    );
    // A re-check that waits for nothing is asked by the gate, each refusal its own guarded transition.
    expect(mermaid).toContain(
      'executing_rechecking_arguments --> executing_selecting: always [canRecheckNow and not isStillAuthorized] / noteRecheck, refuseAtRecheckNow',
    );
    expect(mermaid).toContain('executing_recheckingResend --> executing_resending: always [not canRecheckNow]');
    expect(mermaid).toContain('deciding --> paused: always [isUserAway] / pauseForAbsence');
    expect(mermaid).toContain(
      'executing_selecting --> executing_pausedBeforeWrite: always [isNextStepWrite and isUserAway and not isUnwinding] / pauseForAbsence',
    );
    expect(mermaid).toContain('paused --> deciding: user.returned [isAboutTaskUser] / resumeForUser');
    expect(mermaid).toContain(
      'executing_reconciling --> executing_recheckingResend: xstate.done.actor.lookup [wasWriteNotFound and isSameKeyRetrySafe and canRetryWrite and hasBudgetForRetry] / prepareResend',
    );
    expect(mermaid).toContain(
      'executing_resending --> executing_writing: xstate.done.actor.recheck [holdsScopesNow and isStillAuthorized and isWithinRateLimit] / resendWrite',
    );
    expect(mermaid).toContain('reviewRequired : tags waiting, review');
    expect(mermaid).toContain('waitingForModel --> thinking: timer.modelRetryDue [isModelRetryDue] / resumeModel');
    // Nothing but a passing re-check sends a write: the only edges into writing come from rechecking and resending,
    // or from the gate's own re-check (`canRecheckNow`), once every refusal before it did not hold.
    const intoWriting = [...mermaid.matchAll(/^\s*(\S+) --> executing_writing:/gm)]
      .map((m) => m[1])
      .filter((source) => source !== 'executing_writing');
    expect([...new Set(intoWriting)].sort()).toEqual([
      'executing_recheckingResend',
      'executing_rechecking_arguments',
      'executing_rechecking_hooks',
      'executing_resending',
    ]);
    expect(mermaid).toContain(
      'executing_rechecking_arguments --> executing_writing: always [canRecheckNow] / noteRecheck, startWriteNow',
    );
    expect(mermaid).toContain(
      'executing_recheckingResend --> executing_writing: always [holdsScopesNow and isStillAuthorized] / noteRecheck, resendWriteNow',
    );
  });

  it('renders a self-contained HTML page with an inline SVG and no external resources', () => {
    const html = generated['agentMachine.html']!;
    expect(html).toContain('<svg');
    expect(html).not.toMatch(/<script|https?:\/\/(?!www\.w3\.org\/2000\/svg)/);
    for (const name of usedGuards) expect(html).toContain(name);
  });
});
