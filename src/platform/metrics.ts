/**
 * Counters exposed at /metrics in Prometheus' text format. Labels are fixed, low-cardinality
 * words (kind, outcome, reason), never ids or content.
 */
export class Metrics {
  private readonly counters = new Map<string, { help: string; values: Map<string, number> }>();

  inc(name: string, help: string, labels: Readonly<Record<string, string>> = {}, by = 1): void {
    let counter = this.counters.get(name);
    if (counter === undefined) {
      counter = { help, values: new Map() };
      this.counters.set(name, counter);
    }
    const key = Object.entries(labels)
      .map(([k, v]) => `${k}="${v.replace(/["\\\n]/g, '_')}"`)
      .join(',');
    counter.values.set(key, (counter.values.get(key) ?? 0) + by);
  }

  render(): string {
    const lines: string[] = [];
    for (const [name, { help, values }] of this.counters) {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} counter`);
      for (const [labels, value] of values) lines.push(`${name}${labels ? `{${labels}}` : ''} ${value}`);
    }
    return `${lines.join('\n')}\n`;
  }
}
