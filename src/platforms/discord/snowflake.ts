/**
 * Discord's snowflake ids: 64-bit numbers whose top 42 bits are milliseconds since Discord's
 * epoch, so an id tells when it was made and ids sort by time.
 * https://discord.com/developers/docs/reference#snowflakes
 */

/** Discord's epoch (2015-01-01), the origin of snowflake timestamps. */
export const DISCORD_EPOCH = 1420070400000n;

/** The smallest snowflake of a moment (one before the epoch is the epoch's). */
export function snowflakeAt(time: Date): string {
  const ms = BigInt(Math.max(0, time.getTime())) - DISCORD_EPOCH;
  return String((ms > 0n ? ms : 0n) << 22n);
}

/** When a snowflake was made. */
export function snowflakeTime(id: string): Date {
  return new Date(Number((BigInt(id) >> 22n) + DISCORD_EPOCH));
}

/**
 * New snowflakes as one Discord worker makes them: the current time, worker 1, process 0, and an
 * increment that tells apart the ids of one millisecond.
 */
export class SnowflakeGenerator {
  private lastMs = 0n;
  private increment = 0n;

  next(): string {
    const ms = BigInt(Date.now()) - DISCORD_EPOCH;
    if (ms === this.lastMs) this.increment += 1n;
    else {
      this.lastMs = ms;
      this.increment = 0n;
    }
    return String((ms << 22n) | (1n << 17n) | (this.increment & 0xfffn));
  }
}
