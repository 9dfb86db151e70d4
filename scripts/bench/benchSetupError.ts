/** Something the bench needs is missing (Redis, the LangGraph peer's dependencies); the message says what to do. */
export class BenchSetupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}
