export { compileLockKeys } from './key-template.js';
export type {
  CompiledLockKeys,
  CompileLockKeysOptions,
  KeyTemplateOrigin,
  LockKeySource,
} from './key-template.js';
export {
  DEFAULT_MAX_KEY_LENGTH,
  encodeKeyPart,
  validateLockKey,
} from './lock-key-rules.js';
