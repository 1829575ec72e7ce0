export const SHIP = 'ship';
export const SEPARATOR = ':';
