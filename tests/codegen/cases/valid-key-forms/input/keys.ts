export const notifyKey = ({ input }: { input: { email: string } }): string => `notify:${input.email}`;
