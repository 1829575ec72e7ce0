/**
 * The few PostgreSQL wire-protocol (v3) messages the dev server's bridge reads or writes itself.
 * Every message but the startup packets is a type byte, then an int32 length counting itself and
 * the body; startup packets have no type byte. Everything else passes through untouched.
 */

export const PROTOCOL_V3 = 196_608;
export const SSL_REQUEST_CODE = 80_877_103;
export const GSSENC_REQUEST_CODE = 80_877_104;
export const CANCEL_REQUEST_CODE = 80_877_102;

/** The transaction status a ReadyForQuery ('Z') carries: idle, in a transaction, in a failed one. */
export type TransactionStatus = 'I' | 'T' | 'E';

export interface WireMessage {
  /** The type byte as a character ('Q', 'P', 'Z', …). */
  readonly type: string;
  /** The whole message, type byte and length included. */
  readonly bytes: Buffer;
}

/** Splits `buffer` into whole typed messages; `rest` is the incomplete tail, kept for the next read. */
export function splitMessages(buffer: Buffer): { messages: WireMessage[]; rest: Buffer } {
  const messages: WireMessage[] = [];
  let offset = 0;
  while (buffer.length - offset >= 5) {
    const length = buffer.readInt32BE(offset + 1);
    if (buffer.length - offset < 1 + length) break;
    messages.push({ type: String.fromCharCode(buffer[offset]!), bytes: buffer.subarray(offset, offset + 1 + length) });
    offset += 1 + length;
  }
  return { messages, rest: buffer.subarray(offset) };
}

/** A typed message with `body` (the length is filled in). */
export function message(type: string, body: Buffer = Buffer.alloc(0)): Buffer {
  const header = Buffer.alloc(5);
  header.write(type, 0, 'latin1');
  header.writeInt32BE(4 + body.length, 1);
  return Buffer.concat([header, body]);
}

function int32(value: number): Buffer {
  const bytes = Buffer.alloc(4);
  bytes.writeInt32BE(value);
  return bytes;
}

function cstring(text: string): Buffer {
  return Buffer.from(`${text}\0`, 'utf8');
}

export const authenticationOk = (): Buffer => message('R', int32(0));
export const parameterStatus = (name: string, value: string): Buffer =>
  message('S', Buffer.concat([cstring(name), cstring(value)]));
export const backendKeyData = (pid: number, secret: number): Buffer =>
  message('K', Buffer.concat([int32(pid), int32(secret)]));
export const readyForQuery = (status: TransactionStatus): Buffer => message('Z', Buffer.from(status, 'latin1'));
export const commandComplete = (tag: string): Buffer => message('C', cstring(tag));
export const errorResponse = (code: string, text: string): Buffer =>
  message(
    'E',
    Buffer.concat([cstring(`SERROR`), cstring(`VERROR`), cstring(`C${code}`), cstring(`M${text}`), Buffer.from([0])]),
  );

/** Frontend messages the bridge sends on behalf of a client that went away. */
export const syncMessage = (): Buffer => message('S');
export const queryMessage = (sql: string): Buffer => message('Q', cstring(sql));
export const closeStatementMessage = (name: string): Buffer =>
  message('C', Buffer.concat([Buffer.from('S', 'latin1'), cstring(name)]));

/** The text of a simple Query ('Q') message. */
export function queryText(query: WireMessage): string {
  return query.bytes.toString('utf8', 5, query.bytes.length - 1);
}

/** The status of a ReadyForQuery ('Z') message. */
export function transactionStatus(ready: WireMessage): TransactionStatus {
  return String.fromCharCode(ready.bytes[5]!) as TransactionStatus;
}

/** Channel and payload of a NotificationResponse ('A'): int32 pid, channel, payload. */
export function notification(bytes: Buffer): { channel: string; payload: string } {
  const channelEnd = bytes.indexOf(0, 9);
  const payloadEnd = bytes.indexOf(0, channelEnd + 1);
  return {
    channel: bytes.toString('utf8', 9, channelEnd),
    payload: bytes.toString('utf8', channelEnd + 1, payloadEnd),
  };
}

export function notificationResponse(pid: number, channel: string, payload: string): Buffer {
  return message('A', Buffer.concat([int32(pid), cstring(channel), cstring(payload)]));
}

/**
 * Reads the C strings of a message body from `offset`: the names a Parse, Bind, Describe or Close
 * carries come first in the body, so renaming them rewrites only the head of the message.
 */
function readCString(bytes: Buffer, offset: number): { text: string; end: number } {
  const end = bytes.indexOf(0, offset);
  return { text: bytes.toString('utf8', offset, end), end: end + 1 };
}

/**
 * Rewrites the prepared-statement and portal names of a Parse ('P'), Bind ('B'), Describe ('D')
 * or Close ('C') with `rename` (the unnamed "" stays unnamed). PGlite is one session, so every
 * client's named statements share one namespace there: two node-postgres connections that prepare
 * the same name would collide without it.
 */
export function renameStatements(msg: WireMessage, rename: (kind: 'S' | 'P', name: string) => string): Buffer {
  const bytes = msg.bytes;
  const rewrite = (
    names: Array<{ kind: 'S' | 'P'; text: string }>,
    tailStart: number,
    prefix: Buffer = Buffer.alloc(0),
  ): Buffer => {
    const head = names.map(({ kind, text }) => cstring(text === '' ? '' : rename(kind, text)));
    return message(msg.type, Buffer.concat([prefix, ...head, bytes.subarray(tailStart)]));
  };
  switch (msg.type) {
    case 'P': {
      const statement = readCString(bytes, 5);
      return rewrite([{ kind: 'S', text: statement.text }], statement.end);
    }
    case 'B': {
      const portal = readCString(bytes, 5);
      const statement = readCString(bytes, portal.end);
      return rewrite(
        [
          { kind: 'P', text: portal.text },
          { kind: 'S', text: statement.text },
        ],
        statement.end,
      );
    }
    case 'D':
    case 'C': {
      const kind = String.fromCharCode(bytes[5]!) as 'S' | 'P';
      const name = readCString(bytes, 6);
      return rewrite([{ kind, text: name.text }], name.end, bytes.subarray(5, 6));
    }
    default:
      return bytes;
  }
}
