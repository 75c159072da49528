import type { Kysely } from 'kysely';

/**
 * The store holds every part's tables; each part (a module, a platform) sees only its own, typed by
 * `T`. Kysely's types are invariant in the schema, so the narrowing is this one cast.
 */
export function tablesOf<T>(db: Pick<Kysely<unknown>, 'destroy' | 'isTransaction'>): Kysely<T> {
  return db as Kysely<T>;
}
