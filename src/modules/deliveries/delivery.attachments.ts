import { InvalidRequestError } from '../../infra/errors.js';
import type { OutgoingMessage, Platform, Platforms } from '../../platforms/platform.js';
import type { Delivery, MessageBody } from './delivery.js';
import type { AttachmentPorts, DeliveryPorts } from './send-kind.js';

/** The contract's reason for attachments on a platform that cannot send files (openapi/files.yaml). */
export const FILES_UNSUPPORTED = 'body.attachments cannot be sent on this platform';

/**
 * Check a post's or DM's attachments before anything is queued, against the limits of the
 * platform it will go to (a post: the one its destination maps to now; a DM: the one its
 * recipient registered on with the caller's bot, `identity`; else home). A request without
 * attachments is not looked at.
 */
export async function checkDeliveryAttachments(delivery: Delivery, identity: string, transports: Platforms, ports: Partial<DeliveryPorts & AttachmentPorts>): Promise<void> {
  const attachments = delivery.body.attachments;
  if (attachments === undefined || attachments.length === 0) return;
  const check = ports.checkAttachments;
  if (check === undefined) throw new InvalidRequestError(FILES_UNSUPPORTED);
  let transport: Platform | undefined = transports.home;
  if (delivery.kind === 'post' && ports.resolveDestination !== undefined) {
    const address = await ports.resolveDestination(delivery.target.guild_id, delivery.target.destination);
    if (address !== undefined) transport = transports.get(address.transport);
  } else if (delivery.kind === 'dm' && ports.registeredOn !== undefined) {
    const name = await ports.registeredOn(delivery.target.user_id, identity);
    if (name !== null) transport = transports.get(name);
  }
  await check(attachments, transport?.files);
}

/**
 * The message a send gives the platform: the stored body, with its attachments' bytes. A platform
 * that cannot attach files, or a file no longer stored, is a refusal for good.
 */
export async function withAttachmentBytes(body: MessageBody, transport: Platform, ports: Partial<AttachmentPorts>): Promise<{ message: OutgoingMessage } | { refused: { code: 'CAPABILITY_UNAVAILABLE' | 'UPSTREAM_UNAVAILABLE'; reason: string } }> {
  const attachments = body.attachments;
  if (attachments === undefined || attachments.length === 0) return { message: body };
  if (transport.files === undefined || ports.attachmentBytes === undefined) return { refused: { code: 'CAPABILITY_UNAVAILABLE', reason: `${transport.name} cannot attach files` } };
  const files = await ports.attachmentBytes(attachments);
  if (files === undefined) return { refused: { code: 'UPSTREAM_UNAVAILABLE', reason: 'an attached file is no longer stored' } };
  return { message: { ...body, files } };
}
