import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const orders = workflow('orders', {
  version: 1,
  input: z.object({ orderId: z.string(), vip: z.boolean(), coupon: z.string().optional() }),
})
  .external('upgrade', {
    output: z.object({ upgradeId: z.string() }),
    key: ({ input }) => `upgrade:${input.orderId}`,
    when: ({ input }) => input.vip,
    idempotentByKey: true,
  })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input, steps }) => `charge:${input.orderId}:${steps.upgrade?.upgradeId}`,
    idempotentByKey: true,
  })
  .external('notify', {
    output: z.object({ messageId: z.string() }),
    key: ({ steps: { upgrade } }) => 'notify:' + upgrade!.upgradeId,
    idempotentByKey: true,
  })
  .external('thank', {
    output: z.object({ messageId: z.string() }),
    key: ({ steps }) => `thank:${steps.upgrade?.upgradeId ?? 'none'}`,
    idempotentByKey: true,
  })
  .external('wrap', {
    output: z.object({ wrapId: z.string() }),
    key: ({ input, steps }) => {
      if (steps.upgrade === undefined) return `wrap:${input.orderId}`;
      return `wrap:${steps.upgrade.upgradeId}`;
    },
    idempotentByKey: true,
  })
  .transactional('record', {
    output: z.object({ ok: z.boolean() }),
    key: ({ input, steps }) => ['record', input.orderId, steps.upgrade?.upgradeId].join(':'),
  })
  .external('gift', {
    output: z.object({ giftId: z.string() }),
    when: ({ input }) => input.vip,
    key: ({ steps }) => `gift:${steps.upgrade!.upgradeId}`,
    idempotentByKey: true,
  })
  .external('survey', {
    output: z.object({ surveyId: z.string() }),
    when: ({ steps }) => steps.upgrade !== undefined,
    key: ({ input, steps }) => (steps.upgrade ? `survey:${steps.upgrade.upgradeId}` : `survey:${input.orderId}`),
    idempotentByKey: true,
  });

/** A compensation of a conditional step runs only if the step's effect was recorded: it may read its output. */
export const upgrades = workflow('upgrades', { version: 1, input: z.object({ orderId: z.string(), vip: z.boolean() }) }).external('upgrade', {
  output: z.object({ upgradeId: z.string() }),
  key: ({ input }) => `upgrade:${input.orderId}`,
  when: ({ input }) => input.vip,
  idempotentByKey: true,
  compensate: {
    name: 'downgrade',
    output: z.object({ ok: z.boolean() }),
    key: ({ steps }) => `downgrade:${steps.upgrade.upgradeId}`,
    idempotentByKey: true,
  },
});
