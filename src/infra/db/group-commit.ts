/**
 * Group commit: writes submitted while earlier ones are being committed are gathered and committed
 * together by one statement, so under load one commit (one WAL flush) carries many rows. An idle
 * store adds no wait: a write submitted when a slot is free is flushed at once, alone. Reads gather
 * the same way (one statement answering many reads, each begun after its caller asked).
 *
 * Each submitter's promise settles only after the statement holding its item has finished, with
 * that item's own result. A batch that fails for any reason other than the store being unavailable
 * is retried item by item, so one bad item fails alone.
 */
export interface GroupCommitOptions<T, R> {
  /** Commit these items in one statement; return one result per item, in order. */
  commit(items: readonly T[]): Promise<R[]>;
  /** Statements in flight at once (connections it may hold). */
  maxInFlight: number;
  /** Most items in one statement. */
  maxBatch: number;
  /** Errors that fail the whole batch without retrying item by item (e.g. the store is down). */
  isFatal(err: unknown): boolean;
}

interface Waiting<T, R> {
  item: T;
  resolve(result: R): void;
  reject(err: unknown): void;
}

export class GroupCommit<T, R> {
  private queue: Waiting<T, R>[] = [];
  private inFlight = 0;
  private scheduled = false;
  /** Statements committed and items they carried, for the bench and tests. */
  readonly stats = { statements: 0, items: 0 };

  constructor(private readonly options: GroupCommitOptions<T, R>) {}

  submit(item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.options.maxInFlight || this.queue.length === 0) return;
    // Flush after the I/O already pending is read: the requests that arrived meanwhile join the batch
    // (on an idle server that is none, and nothing waits).
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    while (this.inFlight < this.options.maxInFlight && this.queue.length > 0) {
      const batch = this.queue.splice(0, this.options.maxBatch);
      this.inFlight += 1;
      void this.run(batch).finally(() => {
        this.inFlight -= 1;
        this.schedule();
      });
    }
  }

  private async run(batch: Waiting<T, R>[]): Promise<void> {
    try {
      const results = await this.options.commit(batch.map((w) => w.item));
      this.stats.statements += 1;
      this.stats.items += batch.length;
      batch.forEach((w, i) => w.resolve(results[i] as R));
    } catch (err) {
      if (batch.length === 1 || this.options.isFatal(err)) {
        for (const w of batch) w.reject(err);
        return;
      }
      await Promise.all(
        batch.map(async (w) => {
          try {
            const [result] = await this.options.commit([w.item]);
            w.resolve(result as R);
          } catch (e) {
            w.reject(e);
          }
        }),
      );
    }
  }
}
