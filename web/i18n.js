// The console's words in the person's language: every label, button, tooltip, empty state and
// error comes from a catalog (lang_en.json, lang_zh.json), never from a literal in a view.
//
// The language is the team's `language` (GET /api/language) unless the person chose another
// (kept in localStorage). A text is looked up by key; `{name}` placeholders are filled from
// the values given. A text that depends on a count is an object of plural forms (`one`,
// `other`, as Intl.PluralRules names them). A key missing from the catalog shows as the key
// itself in brackets (so a browser test sees it) and is reported once on the console; the
// catalogs' keys and placeholders are checked against each other and the code by
// tests/suite/console_texts.rs, so that never ships.
//
// Numbers, dates and times are formatted for the language's locale (Intl) here too, so no view
// writes a number or a clock time by hand.

import en from './lang_en.json' with { type: 'json' };
import zh from './lang_zh.json' with { type: 'json' };

const CATALOGS = { en, zh };
const LOCALES = { en: 'en-US', zh: 'zh-CN' };
const CHOSEN_KEY = 'cohort.language';

/** The languages the console speaks, each named in itself (for the switch). */
export const LANGUAGES = [
  { code: 'en', name: 'English' },
  { code: 'zh', name: '中文' },
];

let lang = 'en';
let catalog = en;
let plurals = new Intl.PluralRules(LOCALES.en);
const reported = new Set();

export function language() {
  return lang;
}

/** The BCP 47 locale of the language (for Intl and `<html lang>`). */
export function locale() {
  return LOCALES[lang];
}

/** Makes `code` the language of every text from now on (an unknown code keeps English). */
export function setLanguage(code) {
  lang = CATALOGS[code] ? code : 'en';
  catalog = CATALOGS[lang];
  plurals = new Intl.PluralRules(LOCALES[lang]);
  formatters.clear();
  document.documentElement.lang = LOCALES[lang];
}

/** The language the person chose on this browser, if any. */
export function chosenLanguage() {
  const c = localStorage.getItem(CHOSEN_KEY);
  return c && CATALOGS[c] ? c : null;
}

export function chooseLanguage(code) {
  localStorage.setItem(CHOSEN_KEY, code);
}

/** The text of `key`, its `{placeholders}` filled from `vars`. */
export function t(key, vars) {
  const text = catalog[key];
  if (typeof text !== 'string') return missing(key);
  return fill(text, vars);
}

/** The text of `key` for the count `n` (its plural form), `{n}` filled with `n` formatted. */
export function tn(key, n, vars) {
  const forms = catalog[key];
  if (!forms || typeof forms !== 'object') return missing(key);
  const text = forms[plurals.select(n)] ?? forms.other;
  return fill(text, { ...vars, n: num(n) });
}

/**
 * The text of `key` as a list of strings and elements: each `{name}` is `parts[name]` (an
 * element, e.g. a bold name, or a string), so an element sits where the language puts it in
 * the sentence. `h()` takes the list as a child.
 */
export function tParts(key, parts) {
  const text = catalog[key];
  if (typeof text !== 'string') return [missing(key)];
  return text
    .split(/\{(\w+)\}/)
    .map((piece, i) => (i % 2 ? (piece in parts ? parts[piece] : `{${piece}}`) : piece))
    .filter((x) => x !== '' && x !== null && x !== undefined);
}

function fill(text, vars) {
  if (!vars) return text;
  return text.replace(/\{(\w+)\}/g, (all, name) => (name in vars ? String(vars[name]) : all));
}

function missing(key) {
  if (!reported.has(key)) {
    reported.add(key);
    console.error(`console text missing: ${key} (${lang})`);
  }
  return `[${key}]`;
}

/**
 * Fills the page's fixed texts: an element's `data-i18n` names the key of its text,
 * `data-i18n-title`, `data-i18n-placeholder` and `data-i18n-aria-label` the keys of those
 * attributes. Only the element's own first text node is replaced, so a count or input inside
 * a label stays.
 */
export function applyStatic(root = document) {
  for (const el of root.querySelectorAll('[data-i18n]')) {
    const text = t(el.dataset.i18n);
    const node = [...el.childNodes].find((n) => n.nodeType === Node.TEXT_NODE && n.textContent.trim());
    if (node) node.textContent = node.textContent.replace(node.textContent.trim(), text);
    else el.prepend(text);
  }
  for (const [attr, data] of [
    ['title', 'i18nTitle'],
    ['placeholder', 'i18nPlaceholder'],
    ['aria-label', 'i18nAriaLabel'],
  ]) {
    for (const el of root.querySelectorAll(`[data-i18n-${attr}]`)) el.setAttribute(attr, t(el.dataset[data]));
  }
}

// ---------------------------------------------------------------- numbers and times

/** The formatters of the language, made once each (Intl's are costly to make): numbers by
 * their decimals, dates by kind. Emptied when the language changes. */
const formatters = new Map();

function numberFormat(digits) {
  let f = formatters.get(digits);
  if (!f) {
    f = new Intl.NumberFormat(LOCALES[lang], { minimumFractionDigits: digits, maximumFractionDigits: digits });
    formatters.set(digits, f);
  }
  return f;
}

/** A number in the locale's way (grouping, decimal sign), with `digits` decimals. */
export function num(n, digits = 0) {
  return numberFormat(digits).format(Number(n || 0));
}

/** A time of day, "05:20:06", in the locale's clock (a formatter made once a language: a
 * large team's steps each show a few). */
export function clockTime(date) {
  return dateFormat('clock', { hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' }).format(date);
}

/** A date and time in the locale's way. */
export function dateTime(date) {
  return dateFormat('date', { year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' }).format(date);
}

function dateFormat(kind, options) {
  let f = formatters.get(kind);
  if (!f) {
    f = new Intl.DateTimeFormat(LOCALES[lang], options);
    formatters.set(kind, f);
  }
  return f;
}
