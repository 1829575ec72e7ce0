import type { z } from 'zod';

/** An event name: lower-case letters, digits, `.`, `_` and `-`, starting with a letter; at most 127 characters. */
export const EVENT_NAME = /^[a-z][a-z0-9._-]{0,126}$/;

/**
 * A typed event, declared once and shared by the workflows that wait for it (`.waitFor`) and
 * the code that sends it (`client.sendEvent`, `ledgerflow send-event`). Its payload is
 * validated against `payload` before anything is written.
 *
 * @example
 * export const paymentSettled = event('payment.settled', z.object({ orderId: z.string(), paid: z.boolean() }));
 */
export interface EventDefinition<TName extends string = string, TPayload extends z.ZodType = z.ZodType> {
  readonly name: TName;
  readonly payload: TPayload;
}

/** Any event, whatever its payload. */
export type AnyEvent = EventDefinition<string, z.ZodType>;

/** The payload an event carries once validated (what a waiting step receives). */
export type EventPayload<E extends AnyEvent> = z.output<E['payload']>;

/** What a sender passes (before schema defaults and transforms). */
export type EventSendPayload<E extends AnyEvent> = z.input<E['payload']>;

export function event<TName extends string, TPayload extends z.ZodType>(
  name: TName,
  payload: TPayload,
): EventDefinition<TName, TPayload> {
  if (!EVENT_NAME.test(name)) {
    throw new TypeError(
      `Invalid event name "${name}": use lower-case letters, digits, ".", "_" and "-", starting with a letter (max 127).`,
    );
  }
  return Object.freeze({ name, payload });
}
