/** A module without a `workflows` export, for the CLI's error message. */
export const registrations = [];
