// @ts-check
// ESLint's and typescript-eslint's recommended rules (syntax only: a type-aware pass took ~52 s here and found no
// floating promise). `npm run lint`; prettier owns layout, so no stylistic rule is enabled.
import js from '@eslint/js';
import { defineConfig, globalIgnores } from 'eslint/config';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default defineConfig(
  // Generated output, fixtures that are other packages' code, and the separate LangGraph benchmark package.
  globalIgnores(['dist/', 'coverage/', '.data/', 'visualizations/', 'test/fixtures/', 'bench/']),
  {
    linterOptions: { reportUnusedDisableDirectives: 'error' },
  },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    languageOptions: { globals: globals.node },
    rules: {
      // A leading underscore marks a binding kept on purpose: a destructured field dropped from a copy, an unused
      // parameter of a fixed signature.
      '@typescript-eslint/no-unused-vars': [
        'error',
        {
          argsIgnorePattern: '^_',
          varsIgnorePattern: '^_',
          caughtErrorsIgnorePattern: '^_',
          destructuredArrayIgnorePattern: '^_',
          ignoreRestSiblings: true,
        },
      ],
    },
  },
  {
    // The service's pages run in the browser as ES modules.
    files: ['src/http/pages/**/*.js'],
    languageOptions: { globals: globals.browser },
  },
  {
    files: ['test/**/*.ts'],
    rules: {
      // Tests read raw JSON (fixtures, wire bodies) and build deliberately malformed values.
      '@typescript-eslint/no-explicit-any': 'off',
    },
  },
);
