export interface Shop {
  'shop.payment': { id: string; order_id: string };
  'payment': { id: string; order_id: string };
  'shop.audit': { order_id: string };
  'shop.customer': { id: string; name: string };
  'shop.counter': { order_id: string; n: number };
}
