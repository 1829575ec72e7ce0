import { Kysely } from 'kysely';

export const db = new Kysely<any>({} as any);
