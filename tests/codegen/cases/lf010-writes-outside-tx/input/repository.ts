import pg from 'pg';

const pool = new pg.Pool();

export async function enqueue(orderId: string): Promise<void> {
  await pool.query({ text: 'INSERT INTO shop.outbox (order_id) VALUES ($1)', values: [orderId] });
}
