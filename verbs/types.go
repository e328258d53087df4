package verbs

import (
	"net/netip"

	"github.com/rdma-go/rdma-go/provider"
)

// The data types of the verbs API are defined in package provider, the seam
// between verbs and the devices, and are the same types here: a SendWR,
// RecvWR or WC slice goes to the device's provider as it is, without a
// copy or conversion. Their documentation is in package provider.
type (
	WCStatus       = provider.WCStatus
	WCOpcode       = provider.WCOpcode
	WCFlags        = provider.WCFlags
	WROpcode       = provider.WROpcode
	SendFlags      = provider.SendFlags
	AccessFlags    = provider.AccessFlags
	QPState        = provider.QPState
	QPType         = provider.QPType
	MTU            = provider.MTU
	QPAttrMask     = provider.QPAttrMask
	PortState      = provider.PortState
	LinkLayer      = provider.LinkLayer
	NodeType       = provider.NodeType
	TransportType  = provider.TransportType
	AtomicCap      = provider.AtomicCap
	GIDType        = provider.GIDType
	DeviceCapFlags = provider.DeviceCapFlags
	EventType      = provider.EventType
	GID            = provider.GID
	GlobalRoute    = provider.GlobalRoute
	AHAttr         = provider.AHAttr
	QPCap          = provider.QPCap
	QPAttr         = provider.QPAttr
	SGE            = provider.SGE
	SendWR         = provider.SendWR
	RecvWR         = provider.RecvWR
	WC             = provider.WC
	DeviceAttr     = provider.DeviceAttr
	PortAttr       = provider.PortAttr
	SRQAttr        = provider.SRQAttr
	SRQAttrMask    = provider.SRQAttrMask
	MWType         = provider.MWType
	MWBindInfo     = provider.MWBindInfo
	Counters       = provider.Counters
	Counter        = provider.Counter
)

const (
	WCSuccess                    = provider.WCSuccess
	WCLocLenErr                  = provider.WCLocLenErr
	WCLocQPOpErr                 = provider.WCLocQPOpErr
	WCLocEECOpErr                = provider.WCLocEECOpErr
	WCLocProtErr                 = provider.WCLocProtErr
	WCWRFlushErr                 = provider.WCWRFlushErr
	WCMWBindErr                  = provider.WCMWBindErr
	WCBadRespErr                 = provider.WCBadRespErr
	WCLocAccessErr               = provider.WCLocAccessErr
	WCRemInvReqErr               = provider.WCRemInvReqErr
	WCRemAccessErr               = provider.WCRemAccessErr
	WCRemOpErr                   = provider.WCRemOpErr
	WCRetryExcErr                = provider.WCRetryExcErr
	WCRNRRetryExcErr             = provider.WCRNRRetryExcErr
	WCLocRDDViolErr              = provider.WCLocRDDViolErr
	WCRemInvRDReqErr             = provider.WCRemInvRDReqErr
	WCRemAbortErr                = provider.WCRemAbortErr
	WCInvEECNErr                 = provider.WCInvEECNErr
	WCInvEECStateErr             = provider.WCInvEECStateErr
	WCFatalErr                   = provider.WCFatalErr
	WCRespTimeoutErr             = provider.WCRespTimeoutErr
	WCGeneralErr                 = provider.WCGeneralErr
	WCTMErr                      = provider.WCTMErr
	WCTMRndvIncomplete           = provider.WCTMRndvIncomplete
	WCSend                       = provider.WCSend
	WCRDMAWrite                  = provider.WCRDMAWrite
	WCRDMARead                   = provider.WCRDMARead
	WCCompSwap                   = provider.WCCompSwap
	WCFetchAdd                   = provider.WCFetchAdd
	WCBindMW                     = provider.WCBindMW
	WCLocalInv                   = provider.WCLocalInv
	WCTSO                        = provider.WCTSO
	WCFlush                      = provider.WCFlush
	WCAtomicWrite                = provider.WCAtomicWrite
	WCRecv                       = provider.WCRecv
	WCRecvRDMAWithImm            = provider.WCRecvRDMAWithImm
	WCFlagGRH                    = provider.WCFlagGRH
	WCFlagWithImm                = provider.WCFlagWithImm
	WCFlagIPCsumOK               = provider.WCFlagIPCsumOK
	WCFlagWithInv                = provider.WCFlagWithInv
	WRRDMAWrite                  = provider.WRRDMAWrite
	WRRDMAWriteWithImm           = provider.WRRDMAWriteWithImm
	WRSend                       = provider.WRSend
	WRSendWithImm                = provider.WRSendWithImm
	WRRDMARead                   = provider.WRRDMARead
	WRAtomicCmpAndSwp            = provider.WRAtomicCmpAndSwp
	WRAtomicFetchAndAdd          = provider.WRAtomicFetchAndAdd
	WRLocalInv                   = provider.WRLocalInv
	WRBindMW                     = provider.WRBindMW
	WRSendWithInv                = provider.WRSendWithInv
	WRTSO                        = provider.WRTSO
	WRDriver1                    = provider.WRDriver1
	WRFlush                      = provider.WRFlush
	WRAtomicWrite                = provider.WRAtomicWrite
	SendFence                    = provider.SendFence
	SendSignaled                 = provider.SendSignaled
	SendSolicited                = provider.SendSolicited
	SendInline                   = provider.SendInline
	SendIPCsum                   = provider.SendIPCsum
	AccessLocalWrite             = provider.AccessLocalWrite
	AccessRemoteWrite            = provider.AccessRemoteWrite
	AccessRemoteRead             = provider.AccessRemoteRead
	AccessRemoteAtomic           = provider.AccessRemoteAtomic
	AccessMWBind                 = provider.AccessMWBind
	AccessZeroBased              = provider.AccessZeroBased
	AccessOnDemand               = provider.AccessOnDemand
	AccessHugeTLB                = provider.AccessHugeTLB
	AccessFlushGlobal            = provider.AccessFlushGlobal
	AccessFlushPersistent        = provider.AccessFlushPersistent
	AccessRelaxedOrdering        = provider.AccessRelaxedOrdering
	QPAccessMask                 = provider.QPAccessMask
	QPStateReset                 = provider.QPStateReset
	QPStateInit                  = provider.QPStateInit
	QPStateRTR                   = provider.QPStateRTR
	QPStateRTS                   = provider.QPStateRTS
	QPStateSQD                   = provider.QPStateSQD
	QPStateSQE                   = provider.QPStateSQE
	QPStateErr                   = provider.QPStateErr
	QPStateUnknown               = provider.QPStateUnknown
	QPTypeRC                     = provider.QPTypeRC
	QPTypeUC                     = provider.QPTypeUC
	QPTypeUD                     = provider.QPTypeUD
	QPTypeRawPacket              = provider.QPTypeRawPacket
	QPTypeXRCSend                = provider.QPTypeXRCSend
	QPTypeXRCRecv                = provider.QPTypeXRCRecv
	PathMigMigrated              = provider.PathMigMigrated
	PathMigRearm                 = provider.PathMigRearm
	PathMigArmed                 = provider.PathMigArmed
	MTU256                       = provider.MTU256
	MTU512                       = provider.MTU512
	MTU1024                      = provider.MTU1024
	MTU2048                      = provider.MTU2048
	MTU4096                      = provider.MTU4096
	QPAttrState                  = provider.QPAttrState
	QPAttrCurState               = provider.QPAttrCurState
	QPAttrEnSQDAsyncNotify       = provider.QPAttrEnSQDAsyncNotify
	QPAttrAccessFlags            = provider.QPAttrAccessFlags
	QPAttrPKeyIndex              = provider.QPAttrPKeyIndex
	QPAttrPort                   = provider.QPAttrPort
	QPAttrQKey                   = provider.QPAttrQKey
	QPAttrAV                     = provider.QPAttrAV
	QPAttrPathMTU                = provider.QPAttrPathMTU
	QPAttrTimeout                = provider.QPAttrTimeout
	QPAttrRetryCnt               = provider.QPAttrRetryCnt
	QPAttrRNRRetry               = provider.QPAttrRNRRetry
	QPAttrRQPSN                  = provider.QPAttrRQPSN
	QPAttrMaxQPRDAtomic          = provider.QPAttrMaxQPRDAtomic
	QPAttrAltPath                = provider.QPAttrAltPath
	QPAttrMinRNRTimer            = provider.QPAttrMinRNRTimer
	QPAttrSQPSN                  = provider.QPAttrSQPSN
	QPAttrMaxDestRDAtomic        = provider.QPAttrMaxDestRDAtomic
	QPAttrPathMigState           = provider.QPAttrPathMigState
	QPAttrCap                    = provider.QPAttrCap
	QPAttrDestQPN                = provider.QPAttrDestQPN
	QPAttrRateLimit              = provider.QPAttrRateLimit
	QPAttrAll                    = provider.QPAttrAll
	PortNOP                      = provider.PortNOP
	PortDown                     = provider.PortDown
	PortInit                     = provider.PortInit
	PortArmed                    = provider.PortArmed
	PortActive                   = provider.PortActive
	PortActiveDefer              = provider.PortActiveDefer
	LinkLayerUnspecified         = provider.LinkLayerUnspecified
	LinkLayerInfiniBand          = provider.LinkLayerInfiniBand
	LinkLayerEthernet            = provider.LinkLayerEthernet
	NodeUnknown                  = provider.NodeUnknown
	NodeCA                       = provider.NodeCA
	NodeSwitch                   = provider.NodeSwitch
	NodeRouter                   = provider.NodeRouter
	NodeRNIC                     = provider.NodeRNIC
	NodeUSNIC                    = provider.NodeUSNIC
	NodeUSNICUDP                 = provider.NodeUSNICUDP
	NodeUnspecified              = provider.NodeUnspecified
	TransportUnknown             = provider.TransportUnknown
	TransportIB                  = provider.TransportIB
	TransportIWARP               = provider.TransportIWARP
	TransportUSNIC               = provider.TransportUSNIC
	TransportUSNICUDP            = provider.TransportUSNICUDP
	TransportUnspecified         = provider.TransportUnspecified
	AtomicNone                   = provider.AtomicNone
	AtomicHCA                    = provider.AtomicHCA
	AtomicGlob                   = provider.AtomicGlob
	GIDTypeIB                    = provider.GIDTypeIB
	GIDTypeRoCEv1                = provider.GIDTypeRoCEv1
	GIDTypeRoCEv2                = provider.GIDTypeRoCEv2
	DeviceCapResizeMaxWR         = provider.DeviceCapResizeMaxWR
	DeviceCapBadPKeyCntr         = provider.DeviceCapBadPKeyCntr
	DeviceCapBadQKeyCntr         = provider.DeviceCapBadQKeyCntr
	DeviceCapRawMulti            = provider.DeviceCapRawMulti
	DeviceCapAutoPathMig         = provider.DeviceCapAutoPathMig
	DeviceCapChangePhyPort       = provider.DeviceCapChangePhyPort
	DeviceCapUDAVPortEnforce     = provider.DeviceCapUDAVPortEnforce
	DeviceCapCurrQPStateMod      = provider.DeviceCapCurrQPStateMod
	DeviceCapShutdownPort        = provider.DeviceCapShutdownPort
	DeviceCapInitType            = provider.DeviceCapInitType
	DeviceCapPortActiveEvent     = provider.DeviceCapPortActiveEvent
	DeviceCapSysImageGUID        = provider.DeviceCapSysImageGUID
	DeviceCapRCRNRNAKGen         = provider.DeviceCapRCRNRNAKGen
	DeviceCapSRQResize           = provider.DeviceCapSRQResize
	DeviceCapNNotifyCQ           = provider.DeviceCapNNotifyCQ
	DeviceCapMemWindow           = provider.DeviceCapMemWindow
	DeviceCapUDIPCsum            = provider.DeviceCapUDIPCsum
	DeviceCapXRC                 = provider.DeviceCapXRC
	DeviceCapMemMgtExtensions    = provider.DeviceCapMemMgtExtensions
	DeviceCapMemWindowType2A     = provider.DeviceCapMemWindowType2A
	DeviceCapMemWindowType2B     = provider.DeviceCapMemWindowType2B
	DeviceCapRCIPCsum            = provider.DeviceCapRCIPCsum
	DeviceCapRawIPCsum           = provider.DeviceCapRawIPCsum
	DeviceCapManagedFlowSteering = provider.DeviceCapManagedFlowSteering
	DeviceCapRawScatterFCS       = provider.DeviceCapRawScatterFCS
	DeviceCapPCIWriteEndPadding  = provider.DeviceCapPCIWriteEndPadding
	DeviceCapCCDMABounce         = provider.DeviceCapCCDMABounce
	EventCQErr                   = provider.EventCQErr
	EventQPFatal                 = provider.EventQPFatal
	EventQPReqErr                = provider.EventQPReqErr
	EventQPAccessErr             = provider.EventQPAccessErr
	EventCommEst                 = provider.EventCommEst
	EventSQDrained               = provider.EventSQDrained
	EventPathMig                 = provider.EventPathMig
	EventPathMigErr              = provider.EventPathMigErr
	EventDeviceFatal             = provider.EventDeviceFatal
	EventPortActive              = provider.EventPortActive
	EventPortErr                 = provider.EventPortErr
	EventLIDChange               = provider.EventLIDChange
	EventPKeyChange              = provider.EventPKeyChange
	EventSMChange                = provider.EventSMChange
	EventSRQErr                  = provider.EventSRQErr
	EventSRQLimitReached         = provider.EventSRQLimitReached
	EventQPLastWQEReached        = provider.EventQPLastWQEReached
	EventClientReregister        = provider.EventClientReregister
	EventGIDChange               = provider.EventGIDChange
	EventWQFatal                 = provider.EventWQFatal
	EventDeviceSpeedChange       = provider.EventDeviceSpeedChange
	SRQMaxWR                     = provider.SRQMaxWR
	SRQLimit                     = provider.SRQLimit
	MWType1                      = provider.MWType1
	MWType2                      = provider.MWType2
)

// MTUFromBytes returns the code for an exact MTU size of 256, 512, 1024, 2048
// or 4096 bytes; ok is false for any other size.
func MTUFromBytes(n int) (m MTU, ok bool) { return provider.MTUFromBytes(n) }

// MTUFloor returns the largest MTU code whose size is at most n bytes (as
// for deriving a port's active MTU from a link MTU); ok is false when n is
// below 256.
func MTUFloor(n int) (m MTU, ok bool) { return provider.MTUFloor(n) }

// GIDFromIP returns the RoCEv2 GID of an IP address: IPv4 addresses become
// IPv4-mapped GIDs, IPv6 addresses are used as they are (any zone is
// dropped). The zero Addr gives the zero GID.
func GIDFromIP(ip netip.Addr) GID { return provider.GIDFromIP(ip) }

// ParseGID parses the text form of a GID: an IPv6 address as inet_pton
// accepts it, such as "fe80::5054:ff:fe12:3456" or "::ffff:192.0.2.1". A
// plain IPv4 address is accepted too and gives the IPv4-mapped GID. Errors
// wrap ErrInvalidArgument.
func ParseGID(s string) (GID, error) { return provider.ParseGID(s) }
