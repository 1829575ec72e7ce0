export { chargeKey } from './charge-key.js';
export const PREFIX = 'charge';
