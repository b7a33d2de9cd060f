/* Nordic nRF52 UARTE (EasyDMA UART), polled.
 * TX: bytes are copied to a RAM bounce buffer (EasyDMA cannot read flash) and sent with STARTTX.
 * RX: a one-byte DMA buffer restarted by the ENDRX->STARTRX shortcut; the UARTE's own RX FIFO
 * holds bytes that arrive while the byte is being collected. The host protocol is request/response
 * (the host waits for each reply), so a byte is always read well within one character time.
 * Config: EK_UART_BASE (UARTE0 0x40002000), EK_UART_BAUD, EK_UART_TX_PIN, EK_UART_RX_PIN
 * (pin numbers as PSEL values: port * 32 + pin).
 */
#include "ek_board.h"

#define UARTE_REG(off) (*(volatile uint32_t *)(EK_UART_BASE + (off)))
#define TASKS_STARTRX UARTE_REG(0x000u)
#define TASKS_STARTTX UARTE_REG(0x008u)
#define TASKS_STOPTX UARTE_REG(0x00Cu)
#define EVENTS_ENDRX UARTE_REG(0x110u)
#define EVENTS_ENDTX UARTE_REG(0x120u)
#define EVENTS_ERROR UARTE_REG(0x124u)
#define EVENTS_TXSTOPPED UARTE_REG(0x158u)
#define SHORTS UARTE_REG(0x200u)
#define ERRORSRC UARTE_REG(0x480u)
#define ENABLE UARTE_REG(0x500u)
#define PSEL_RTS UARTE_REG(0x508u)
#define PSEL_TXD UARTE_REG(0x50Cu)
#define PSEL_CTS UARTE_REG(0x510u)
#define PSEL_RXD UARTE_REG(0x514u)
#define BAUDRATE UARTE_REG(0x524u)
#define RXD_PTR UARTE_REG(0x534u)
#define RXD_MAXCNT UARTE_REG(0x538u)
#define TXD_PTR UARTE_REG(0x544u)
#define TXD_MAXCNT UARTE_REG(0x548u)
#define CONFIG UARTE_REG(0x56Cu)

#define SHORT_ENDRX_STARTRX (1u << 5)
#define PSEL_DISCONNECTED 0xFFFFFFFFu

static uint8_t tx_buffer[64];
static volatile uint8_t rx_byte;

static uint32_t baud_register(uint32_t baud) {
  switch (baud) { /* values from the nRF52840 Product Specification, UARTE BAUDRATE */
    case 9600: return 0x00275000u;
    case 19200: return 0x004EA000u;
    case 38400: return 0x009D0000u;
    case 57600: return 0x00EB0000u;
    case 230400: return 0x03B00000u;
    case 460800: return 0x07400000u;
    case 921600: return 0x0F000000u;
    case 1000000: return 0x10000000u;
    default: return 0x01D60000u; /* 115200 */
  }
}

void ek_uart_init(void) {
  ENABLE = 0;
  PSEL_TXD = EK_UART_TX_PIN;
  PSEL_RXD = EK_UART_RX_PIN;
  PSEL_RTS = PSEL_DISCONNECTED;
  PSEL_CTS = PSEL_DISCONNECTED;
  BAUDRATE = baud_register(EK_UART_BAUD);
  CONFIG = 0;  /* no parity, no flow control, one stop bit */
  ENABLE = 8u; /* UARTE */
  RXD_PTR = (uint32_t)(uintptr_t)&rx_byte;
  RXD_MAXCNT = 1;
  SHORTS = SHORT_ENDRX_STARTRX;
  EVENTS_ENDRX = 0;
  EVENTS_ERROR = 0;
  TASKS_STARTRX = 1;
}

void ek_uart_write(const uint8_t *data, size_t n) {
  while (n) {
    size_t chunk = n < sizeof tx_buffer ? n : sizeof tx_buffer;
    for (size_t i = 0; i < chunk; ++i) tx_buffer[i] = data[i];
    EVENTS_ENDTX = 0;
    TXD_PTR = (uint32_t)(uintptr_t)tx_buffer;
    TXD_MAXCNT = (uint32_t)chunk;
    TASKS_STARTTX = 1;
    while (!EVENTS_ENDTX) {
    }
    data += chunk;
    n -= chunk;
  }
  EVENTS_TXSTOPPED = 0;
  TASKS_STOPTX = 1;
  while (!EVENTS_TXSTOPPED) {
  }
}

int ek_uart_poll(uint8_t *byte) {
  if (EVENTS_ERROR) {
    ERRORSRC = ERRORSRC; /* write 1s to clear */
    EVENTS_ERROR = 0;
  }
  if (!EVENTS_ENDRX) return 0;
  EVENTS_ENDRX = 0;
  *byte = rx_byte;
  return 1;
}

uint8_t ek_uart_read(void) {
  uint8_t byte;
  while (!ek_uart_poll(&byte)) {
  }
  return byte;
}
