/**
 * `statechart-agent/acceptance`: the design sources' acceptance run as a kit a host runs against its own tools.
 * Give it the tools, the business service's real side effects and a way to make valid and invalid proposals; it
 * drives tasks through the real orchestrator with faults injected around the tools and the model (invalid arguments,
 * calls outside scope or tenant, unknown tools, duplicate call ids, reads that time out, writes whose response is
 * lost, writes that time out without effect, tool output that carries instructions and a model that obeys them) and
 * checks that every invalid call is blocked before execution, that each intent makes one business action, that
 * success is claimed only from a real record, and reports the rates.
 *
 * @example
 * const report = await runAcceptance({ domain: myDomain, plan: planForCalls(10_000, 1) });
 * console.log(formatReport(report));
 * if (!report.ok) process.exitCode = 1;
 */
export { runAcceptance } from './runAcceptance.js';
export { formatReport } from './report.js';
export { planForCalls, expandPlan, seededRandom, INJECTIONS, type TaskSpec } from './plan.js';
export { injectInto } from './faultyTools.js';
export {
  FAULT_CLASSES,
  INVARIANTS,
  type AcceptanceCase,
  type AcceptanceDomain,
  type AcceptanceHost,
  type AcceptanceOptions,
  type AcceptanceReport,
  type ClassRow,
  type FaultClass,
  type FaultPlan,
  type Invariant,
  type InvariantFailure,
  type Metrics,
  type Proposal,
  type SideEffect,
} from './types.js';
