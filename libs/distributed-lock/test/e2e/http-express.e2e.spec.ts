import { defineHttpLockSuite } from './http-fixtures.js';

defineHttpLockSuite('express');
