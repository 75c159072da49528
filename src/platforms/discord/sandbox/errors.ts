import type { Context } from 'koa';

/** Discord's JSON error answer. */
export function discordError(ctx: Context, status: number, code: number, message: string): void {
  ctx.status = status;
  ctx.body = { message, code };
}
