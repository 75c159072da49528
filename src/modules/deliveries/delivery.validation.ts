import { isPlainObject, type SchemaReasons } from '../../infra/contract/reasons.js';
import type { SchemaNode } from '../../infra/contract/spec.js';
import { InvalidRequestError } from '../../infra/errors.js';
import { cardLength, normalizeDelivery, type Card, type Delivery } from './delivery.js';

/**
 * POST /mcp/deliveries validation, in the protocol's order (docs/protocol.md §3): the request object,
 * request_id, kind, body (by kind), target (by kind). Constraints and reasons come from the contract.
 */
export class DeliveryRequestValidator {
  constructor(
    private readonly schemas: Readonly<Record<string, SchemaNode>>,
    private readonly reasons: SchemaReasons,
  ) {}

  validate(input: unknown): Delivery {
    const s = this.schemas;
    if (!isPlainObject(input)) throw new InvalidRequestError(reasonOf(s['DeliveryRequest']));
    this.reasons.check(schema(s, 'RequestId'), input['request_id'], 'request_id');
    this.reasons.check(schema(s, 'DeliveryKind'), input['kind'], 'kind');
    const kind = input['kind'] as Delivery['kind'];
    if (kind === 'delete' || kind === 'reaction') return this.validateMessageOp(input, kind);
    this.reasons.check(schema(s, kind === 'edit' ? 'EditBody' : 'MessageBody'), input['body'], 'body');
    const card = (input['body'] as Record<string, unknown>)['card'] as Card | undefined;
    const cardSchema = schema(s, 'Card');
    if (card !== undefined && cardLength(card) > Number(cardSchema['x-herald-total-max'])) {
      throw new InvalidRequestError(cardSchema['x-herald-reasons']?.['total'] ?? reasonOf(cardSchema));
    }
    const targetSchema = { post: 'PostTarget', dm: 'DmTarget', edit: 'EditTarget' }[kind];
    this.reasons.check(schema(s, targetSchema), input['target'], 'target');
    return normalizeDelivery(input);
  }

  /** A delete (its body may be left out) or a reaction: body, then target, like every kind. */
  private validateMessageOp(input: Record<string, unknown>, kind: 'delete' | 'reaction'): Delivery {
    const s = this.schemas;
    if (kind === 'reaction' || input['body'] !== undefined) this.reasons.check(schema(s, kind === 'delete' ? 'DeleteBody' : 'ReactionBody'), input['body'], 'body');
    this.reasons.check(schema(s, kind === 'delete' ? 'DeleteTarget' : 'ReactionTarget'), input['target'], 'target');
    return normalizeDelivery(input);
  }
}

function schema(schemas: Readonly<Record<string, SchemaNode>>, name: string): SchemaNode {
  const found = schemas[name];
  if (found === undefined) throw new Error(`the contract has no schema ${name}`);
  return found;
}

function reasonOf(node: SchemaNode | undefined): string {
  const reason = node?.['x-herald-reason'];
  if (reason === undefined) throw new Error('the contract is missing an x-herald-reason');
  return reason;
}
