import type { Selectable } from 'kysely';

export interface RegistrationTable {
  /** The bot it is with (src/infra/policy/identity.ts): a person registers with each bot that may reach them. */
  identity: string;
  user_id: string;
  /** 16 random bytes, base64url; changes only across unregister-then-register. */
  generation: string;
  display_name: string;
  registered_at: Date;
  /** The platform they registered on, where their DMs go; null (registered before platforms were recorded): the home platform. */
  transport: string | null;
}

export interface PairingCodeTable {
  /** SHA-256 of the code (hex); the code itself is never stored. */
  code_hash: string;
  /** The bot whose registration it pairs with. */
  identity: string;
  user_id: string;
  generation: string;
  issued_at: Date;
  expires_at: Date;
}

/** Whom a caller is paired with: its last redeemed code's registration. */
export interface AgentPairingTable {
  /** `connector` (the bridge token), or an OAuth client's name (principalName in src/infra/policy/principal.ts). */
  principal: string;
  /** The bot of the registration it paired with. */
  identity: string;
  user_id: string;
  generation: string;
  paired_at: Date;
}

export type RegistrationRow = Selectable<RegistrationTable>;

/** This part's tables, as it sees the store (the whole schema is src/schema.ts, at the wiring). */
export interface IdentityDb {
  registrations: RegistrationTable;
  pairing_codes: PairingCodeTable;
  agent_pairings: AgentPairingTable;
}
