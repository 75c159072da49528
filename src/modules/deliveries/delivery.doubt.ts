/**
 * How far around an in-doubt window reconciliation looks: clock skew between Herald and Discord,
 * and a request Discord finished processing after Herald stopped waiting for it. Apart from
 * delivery.reconcile.ts, which reads history with it, the claim reads it to keep twins apart
 * (delivery.twins.ts), so it lives in neither.
 */
export const RECONCILE_SKEW_MS = 10 * 1000;
