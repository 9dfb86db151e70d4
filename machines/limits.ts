/**
 * The bounds on what a host gives a task, in one place. The orchestrator's start request and host events check
 * them, the HTTP service's bodies are built from those same schemas (so it accepts exactly what the orchestrator
 * does), and the persisted context allows for what sealing adds.
 */
export const INPUT_LIMITS = {
  /** A task's goal as the host gives it, in characters. */
  goal: 16_384,
  /** The goal as persisted: sealing the sensitive values in it can make it longer than the host gave it. */
  storedGoal: 65_536,
  /** A task id the host chooses. */
  taskId: 512,
  /** Text a host event carries: the user's answer to the model's question. */
  eventText: 16_384,
  /** The short fields of a host event: ids, hashes, reasons, notes, user ids. */
  eventShort: 1_024,
} as const;
