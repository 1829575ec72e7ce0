import { event } from 'ledgerflow/dsl';
import { z } from 'zod';

export const paymentSettled = event('payment.settled', z.object({ orderId: z.string() }));
