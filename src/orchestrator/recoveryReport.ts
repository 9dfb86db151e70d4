/** What a recovery (`recover()`, or the orphan sweep) did with the running tasks it found. */
export interface RecoveryReport {
  /** Running tasks this process took over (their lease had expired or was free; still running when loaded). */
  resumed: string[];
  /** Running tasks another live process drives. */
  busy: string[];
  /** Tasks that cannot be restored, with the reason now recorded on them. */
  quarantined: { taskId: string; reason: string }[];
  /**
   * Running tasks left alone because this process does not have the tools they were started with (as they were):
   * a process that has them recovers them. Nothing is recorded on them.
   */
  catalogMismatch: { taskId: string; reason: string }[];
  /** Confirmations that had expired while no process was running. */
  expired: number;
}
