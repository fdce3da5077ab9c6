import { ConsoleLogger, Logger, type LoggerService } from '@nestjs/common';

/** One line Nest's Logger printed. */
export interface LoggedLine {
  readonly level: 'log' | 'error' | 'warn' | 'debug' | 'verbose' | 'fatal';
  readonly message: string;
  readonly context?: string;
}

/**
 * Nest's Logger output, kept instead of printed: every `Logger` of the
 * process writes here from {@link start} until {@link stop}.
 */
export class LogRecorder {
  readonly lines: LoggedLine[] = [];

  private readonly logger: LoggerService = {
    log: (message, context) => this.keep('log', message, context),
    error: (message, context) => this.keep('error', message, context),
    warn: (message, context) => this.keep('warn', message, context),
    debug: (message, context) => this.keep('debug', message, context),
    verbose: (message, context) => this.keep('verbose', message, context),
    fatal: (message, context) => this.keep('fatal', message, context),
  };

  start(): void {
    this.lines.length = 0;
    Logger.overrideLogger(this.logger);
  }

  stop(): void {
    Logger.overrideLogger(new ConsoleLogger());
  }

  /** Lines at `level` whose message contains `text`. */
  at(level: LoggedLine['level'], text = ''): LoggedLine[] {
    return this.lines.filter(
      (line) => line.level === level && line.message.includes(text),
    );
  }

  /** Lines at error, fatal or warn level. */
  get complaints(): LoggedLine[] {
    return this.lines.filter((line) =>
      ['error', 'fatal', 'warn'].includes(line.level),
    );
  }

  private keep(
    level: LoggedLine['level'],
    message: unknown,
    context: unknown,
  ): void {
    this.lines.push({
      level,
      message: message instanceof Error ? message.message : String(message),
      context: typeof context === 'string' ? context : undefined,
    });
  }
}
