import { CSRF_FIELD } from '../auth.js';
import { html, type Html, type HtmlValue } from '../html.js';
import { page, type PageContext, type Section } from './layout.js';

export interface ConfirmForm {
  readonly section: Section;
  readonly title: string;
  /** What the action will do, shown above the form. */
  readonly explain: HtmlValue;
  /** The URL the form POSTs to (the same as the page's). */
  readonly action: string;
  readonly submit: string;
  readonly danger?: boolean;
  /** Fields of the action itself, above the reason. */
  readonly fields?: HtmlValue;
  /** What was wrong with the last submission: nothing was done. */
  readonly error?: string;
  readonly reason?: string;
  readonly back: string;
}

/**
 * The confirmation page of an operator action: it says what will happen and asks for a reason,
 * which is required and written to the audit trail with the actor. The form POSTs with this
 * session's CSRF token.
 */
export function confirmView(context: PageContext, form: ConfirmForm): Html {
  return page(
    context,
    form.section,
    form.title,
    html`<h1>${form.title}</h1>
<div>${form.explain}</div>
${form.error === undefined ? '' : html`<div class="error" id="action-error">${form.error}\nNothing was changed.</div>`}
<form method="post" action="${form.action}" id="confirm">
<input type="hidden" name="${CSRF_FIELD}" value="${context.csrf}">
${form.fields}
<p><label>Reason (written to the audit trail as ${context.actor})<br><input name="reason" required minlength="3" size="80" value="${form.reason ?? ''}"></label></p>
<p><button type="submit" class="${form.danger === true ? 'danger' : 'go'}">${form.submit}</button> <a href="${form.back}">back</a></p>
</form>`,
  );
}

/** A page for a request the dashboard refuses (400, 403, 404) or could not serve. */
export function messageView(context: PageContext, title: string, message: string): Html {
  return page(
    context,
    undefined,
    title,
    html`<h1>${title}</h1><div class="error" id="message">${message}</div><p><a href="${context.home}">Runs</a></p>`,
  );
}
