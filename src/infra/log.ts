import { pino, type Logger } from 'pino';

/**
 * JSON logs. Nothing logs request or message bodies; headers that carry secrets are redacted in
 * case a future log line includes them.
 */
export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  return pino(
    {
      level,
      base: { service: 'herald' },
      redact: { paths: ['req.headers.authorization', 'headers.authorization', '*.token', 'token'], censor: '[redacted]' },
    },
    // Standard output, written as each line is logged (pino's own default buffers and writes later):
    // a banner printed after a log line comes after it, and a process killed at once loses no line.
    (destination as pino.DestinationStream | undefined) ?? pino.destination({ dest: 1, sync: true }),
  );
}

export type { Logger };
