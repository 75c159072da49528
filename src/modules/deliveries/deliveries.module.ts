import { identityOf } from '../../infra/http/policy.middleware.js';
import type { ModuleParts, ModuleServices } from '../contract.js';
import { capabilitiesOf } from '../../platforms/platform.js';
import { deliveryAdminOperations } from './delivery.admin.http.js';
import { AgentRecordsStore } from './agent-records.js';
import { agentRecordOperations } from './agent-records.http.js';
import { deliveryOperations } from './delivery.http.js';
import { DeliveryJobs, deliveryQueue } from './delivery.jobs.js';
import { heraldMessages } from './delivery.repository.js';
import type { DeliveryMetrics } from './delivery.metrics.js';
import type { DeliveryPorts, SendKind } from './send-kind.js';
import { DeliveryService, type KindSupport } from './delivery.service.js';
import { tablesOf } from '../../infra/db/tables.js';
import { checkDeliveryAttachments, FILES_UNSUPPORTED } from './delivery.attachments.js';
import { InvalidRequestError } from '../../infra/errors.js';

/** Attachments when no module stores files. */
const refuseAttachments = async (): Promise<void> => {
  throw new InvalidRequestError(FILES_UNSUPPORTED);
};
import type { DeliveriesDb } from './delivery.table.js';

/** What the deliveries module gives the others. */
export interface Deliveries {
  readonly deliveries: DeliveryService;
  /** Which kinds this bridge accepts (the protocol's capabilities). */
  readonly capabilities: KindSupport;
  /** A module that owns a send kind (a command's reply, a handoff) declares it here. */
  declare<T>(kind: SendKind<T>): void;
  /** A module answers what the engine asks of it (where a destination maps, who is registered). */
  answer(ports: Partial<DeliveryPorts>): void;
  /** Which of these platform message ids Herald itself sent (the inbox hears replies to them). */
  sentByHerald(messageIds: readonly string[]): Promise<Set<string>>;
}

/** Start the deliveries module (its declaration is index.ts). */
export async function startDeliveries({ config, store, db: tables, clock, log, transports, doorbell, site, policy, registry }: ModuleServices, metrics: DeliveryMetrics): Promise<ModuleParts<Deliveries>> {
  const db = tablesOf<DeliveriesDb>(tables);
  // Each bot's deliveries on the status page, where Herald is several.
  metrics.showIdentities(registry, transports.identities);
  // The protocol's capabilities (and the MCP tools, through them) come from what the home platform can do.
  const can = capabilitiesOf(transports.home);
  const capabilities: KindSupport = {
    post: can.send,
    dm: can.dm && !config.disabledKinds.includes('dm'),
    edit: can.edit && !config.disabledKinds.includes('edit'),
    // The message may be on any platform this Herald runs: refused up front only when none can.
    delete: transports.all.some((t) => capabilitiesOf(t).deletes),
    reaction: transports.all.some((t) => capabilitiesOf(t).reactions),
  };
  // Per platform, what a message there may be and what may be done to it (capabilities?include=platforms).
  const platforms = transports.all.map((t) => {
    const c = capabilitiesOf(t);
    return { name: t.name, files: c.files, reactions: c.reactions, replies: c.replies, threads: c.threads, deletes: c.deletes };
  });
  const deliveries = new DeliveryService(db, clock, capabilities, {
    announce: () => doorbell.ring(),
    // PGlite is one session: one statement at a time whatever we do.
    maxInFlight: store.kind === 'postgres' ? Math.max(1, Math.floor(config.dbPoolSize / 4)) : 1,
  });
  // Chat sends on a platform that paces each sender on its own connection share the pool fairly by sender.
  const queue = deliveryQueue(db, metrics, config.claimSweepMs, { pacedBySender: transports.all.filter((t) => t.chat?.pacedBySender === true).map((t) => t.name), byIdentity: transports.identities.length > 0 }, store.kind === 'postgres');
  // What the engine asks other modules: each answers its own question when it starts (see `answer`).
  const answers: Partial<DeliveryPorts> = {};
  const asked = <K extends keyof DeliveryPorts>(port: K): DeliveryPorts[K] => {
    const answer = answers[port];
    if (answer === undefined) throw new Error(`no module answers ${port}`);
    return answer;
  };
  const ports: DeliveryPorts = {
    resolveDestination: (guildId, destination) => asked('resolveDestination')(guildId, destination),
    isRegistered: (userId, identity) => asked('isRegistered')(userId, identity),
    registeredOn: (userId, identity) => asked('registeredOn')(userId, identity),
    // Files out: present only once the files module answers (otherwise attachments are refused).
    checkAttachments: (attachments, limits) => (answers.checkAttachments ?? refuseAttachments)(attachments, limits),
    attachmentBytes: async (attachments) => answers.attachmentBytes?.(attachments),
  };
  const jobs = new DeliveryJobs(db, transports, clock, log, metrics, {
    nonceWindowMs: config.nonceWindowMs,
    maxAttempts: config.maxAttempts,
    retryBaseMs: config.retryBaseMs,
    leaseMs: config.leaseMs,
  }, ports);
  return {
    gives: {
      deliveries,
      capabilities,
      declare: (kind) => void jobs.declare(kind),
      answer: (given) => void Object.assign(answers, given),
      sentByHerald: (messageIds) => heraldMessages(db, messageIds),
    },
    operations: [deliveryOperations(deliveries, capabilities, metrics, platforms, (delivery, identity) => checkDeliveryAttachments(delivery, identity, transports, ports), (koa) => identityOf(koa, policy)), deliveryAdminOperations(deliveries, transports.all, { ...(site.messageLinkBase !== undefined ? { messageLinkBase: site.messageLinkBase } : {}), speaker: (koa) => identityOf(koa, policy) }), agentRecordOperations(new AgentRecordsStore(db, clock))],
    jobs: [{ queue, kinds: jobs.kinds(), prune: true, report: true, listen: true }],
  };
}
