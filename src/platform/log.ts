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
    destination as pino.DestinationStream | undefined,
  );
}

export type { Logger };
