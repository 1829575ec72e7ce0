export const notAWorkflow = 1;
