/** A Content-Security-Policy header as directive → its sources. */
export function csp(header: string | null): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const part of (header ?? '').split(';')) {
    const [name, ...sources] = part.trim().split(/\s+/);
    if (name !== undefined && name !== '') out.set(name, sources);
  }
  return out;
}
