/** The process environment, or a test's. */
export type Env = Readonly<Record<string, string | undefined>>;

/** At least 256 bits of base64url, so a token cannot be guessed or brute-forced. */
export const STRONG_TOKEN = /^[A-Za-z0-9_-]{43,}$/;

/**
 * Reads variables and collects every problem instead of stopping at the first, so start-up can
 * report them all at once. A variable set to the empty string counts as unset.
 */
export class EnvReader {
  readonly problems: string[] = [];

  constructor(private readonly env: Env) {}

  /** Record a problem found by a check of the caller's own. */
  problem(text: string): void {
    this.problems.push(text);
  }

  text(name: string): string | undefined {
    const v = this.env[name];
    return v === undefined || v === '' ? undefined : v;
  }

  int(name: string, fallback: number, min: number, max: number): number {
    const raw = this.text(name);
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (!/^[0-9]+$/.test(raw) || n < min || n > max) {
      this.problems.push(`${name} must be an integer from ${min} to ${max} (got ${JSON.stringify(raw)})`);
      return fallback;
    }
    return n;
  }

  token(name: string): string | undefined {
    const v = this.text(name);
    if (v !== undefined && !STRONG_TOKEN.test(v)) {
      this.problems.push(
        `${name} is too weak: it must be at least 43 base64url characters (256 bits), ` +
          `e.g. the output of: node -e "console.log(require('crypto').randomBytes(32).toString('base64url'))"`,
      );
    }
    return v;
  }

  /** An http(s) URL, without trailing slashes. */
  url(name: string): string | undefined {
    const v = this.text(name);
    if (v === undefined) return undefined;
    try {
      const u = new URL(v);
      if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('scheme');
    } catch {
      this.problems.push(`${name} must be an http(s) URL`);
    }
    return v.replace(/\/+$/, '');
  }

  onOff(name: string, fallback: boolean): boolean {
    const raw = this.text(name);
    if (raw === undefined) return fallback;
    if (raw !== 'on' && raw !== 'off') this.problems.push(`${name} must be on or off`);
    return raw === 'on';
  }

  trueFalse(name: string, fallback: boolean): boolean {
    const raw = this.text(name);
    if (raw === undefined) return fallback;
    if (raw !== 'true' && raw !== 'false') this.problems.push(`${name} must be true or false`);
    return raw === 'true';
  }

  /** A comma-separated list, items trimmed, empty ones dropped. */
  list(name: string): string[] {
    return (this.text(name) ?? '').split(',').map((k) => k.trim()).filter((k) => k !== '');
  }
}
