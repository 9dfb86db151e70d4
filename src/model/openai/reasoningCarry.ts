/**
 * Reasoning items carried between turns of the Responses adapter. A reasoning model (o-series, gpt-5) thinks before it
 * calls a tool; OpenAI asks that the reasoning items of a turn go back with its function calls, so the model continues
 * from its own reasoning instead of redoing it. With `store: false` (this adapter's rule) the API keeps nothing, so an
 * item can only go back whole: requested with `include: ['reasoning.encrypted_content']` and sent back with its
 * encrypted content (an item sent by id alone fails: "Item with id 'rs_...' not found").
 *
 * The items are opaque blobs the provider encrypted: the host cannot read, redact or audit them, so they are kept
 * out of the task's persisted transcript and journals, in this adapter's memory only, per task and turn (bounded,
 * oldest dropped first). A task that moves to another process, or is restored after a restart, goes on without its
 * earlier reasoning, as it would with a model that has none: the conversation itself is whole in the transcript.
 */
import type { ResponseReasoningItem } from 'openai/resources/responses/responses';

/** A reasoning item as it goes back: its id, summary and encrypted content, as the API returned them. */
export type CarriedReasoning = Pick<ResponseReasoningItem, 'type' | 'id' | 'summary' | 'encrypted_content'>;

export class ReasoningCarry {
  private readonly byTurn = new Map<string, CarriedReasoning[]>();

  constructor(
    /** Turns remembered at most, across tasks (default 2,000). */
    private readonly maxTurns = 2_000,
  ) {}

  /**
   * Remembers the reasoning items of a turn's response (only items with encrypted content can go back), or forgets
   * the turn when it has none: a turn asked again keeps only its last answer's.
   */
  keep(taskId: string, turn: number, output: unknown): void {
    const key = keyOf(taskId, turn);
    this.byTurn.delete(key);
    const items = (Array.isArray(output) ? output : []).flatMap((item: unknown): CarriedReasoning[] => {
      const candidate = item as Partial<ResponseReasoningItem> | null;
      if (candidate?.type !== 'reasoning' || typeof candidate.id !== 'string') return [];
      if (typeof candidate.encrypted_content !== 'string' || candidate.encrypted_content === '') return [];
      return [
        {
          type: 'reasoning',
          id: candidate.id,
          summary: Array.isArray(candidate.summary) ? candidate.summary : [],
          encrypted_content: candidate.encrypted_content,
        },
      ];
    });
    if (items.length === 0) return;
    this.byTurn.set(key, items);
    while (this.byTurn.size > this.maxTurns) this.byTurn.delete(this.byTurn.keys().next().value!);
  }

  /** The items to send back before turn `turn`'s calls (none when this process did not see that turn). */
  of(taskId: string, turn: number): CarriedReasoning[] {
    return this.byTurn.get(keyOf(taskId, turn)) ?? [];
  }
}

const keyOf = (taskId: string, turn: number) => `${taskId}\u0000${turn}`;
