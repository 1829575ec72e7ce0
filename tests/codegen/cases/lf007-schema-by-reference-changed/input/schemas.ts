import { z } from 'zod';

/** Shared schemas, declared once and referred to by name. */
export const OrderInput = z.object({ orderId: z.string(), amountCents: z.number().int().positive() });
export const ChargeOutput = z.object({ chargeId: z.string() });
