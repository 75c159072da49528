import { type Kysely, sql } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// Slack workspaces whose bot token comes from installing the app there from Herald (an identity
// `name=install` of HERALD_SLACK_IDENTITIES), one row per identity, read by every replica. The
// tokens are sealed (AES-256-GCM under HERALD_CREDENTIALS_KEY), never stored in clear. One
// workspace is one identity's: a unique team among the rows not revoked. And the OAuth states
// of installs under way, each good once, kept here so any replica can finish an install, each
// with the hash of the installer's own cookie (only the browser that started it finishes it).
// With Slack's token rotation the bot token expires (12 h): when it was issued, and the short
// lease of the one replica refreshing it (a refresh token is good once).
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('slack_installations')
    .addColumn('identity', 'text', (c) => c.primaryKey())
    .addColumn('team_id', 'text', (c) => c.notNull())
    .addColumn('enterprise_id', 'text')
    .addColumn('bot_user_id', 'text', (c) => c.notNull())
    .addColumn('bot_token', 'text', (c) => c.notNull())
    .addColumn('refresh_token', 'text')
    .addColumn('token_expires_at', 'timestamptz')
    .addColumn('token_issued_at', 'timestamptz')
    .addColumn('refreshing_until', 'timestamptz')
    .addColumn('installed_at', 'timestamptz', (c) => c.notNull())
    .addColumn('revoked_at', 'timestamptz')
    .execute();
  await sql`create unique index slack_installations_team on slack_installations (team_id) where revoked_at is null`.execute(db);
  await sql`comment on column slack_installations.bot_token is 'sealed: v1: + base64(iv, tag, AES-256-GCM ciphertext), bound to the identity'`.execute(db);
  await db.schema
    .createTable('slack_install_states')
    .addColumn('state_hash', 'text', (c) => c.primaryKey())
    .addColumn('binder_hash', 'text', (c) => c.notNull())
    .addColumn('identity', 'text', (c) => c.notNull())
    .addColumn('redirect_uri', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('slack_install_states').execute();
  await db.schema.dropTable('slack_installations').execute();
}
