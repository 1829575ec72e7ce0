import { event } from 'ledgerflow/dsl';
import { z } from 'zod';

const refundIssued = event('refund.issued', z.object({ orderId: z.string() }));

export const events = { refundIssued };
